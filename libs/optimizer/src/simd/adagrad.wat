;; Adagrad over float32 arrays in the imported kernel heap (see adagrad.ts), in the order of the
;; plain JavaScript kernel's operations:
;;   g[i] = grad[i] + wd * param[i]
;;   acc[i] = acc[i] + g[i] * g[i]
;;   out[i] = param[i] - (g[i] / sqrt(acc[i] + eps)) * lr
;; Arrays are byte offsets, n counts elements; four lanes at a time, then the remaining one to
;; three elements one by one with the same float32 operations. `out` may be `param`.
(module
  (import "env" "memory" (memory 1 65536 shared))

  (func (export "adagrad")
    (param $out i32) (param $param i32) (param $grad i32) (param $acc i32) (param $n i32)
    (param $lr f32) (param $eps f32) (param $wd f32)
    (local $i i32) (local $end i32) (local $vectorEnd i32)
    (local $lrv v128) (local $epsv v128) (local $wdv v128) (local $p v128) (local $g v128) (local $a v128)
    (local $ps f32) (local $gs f32) (local $as f32)
    (local.set $lrv (f32x4.splat (local.get $lr)))
    (local.set $epsv (f32x4.splat (local.get $eps)))
    (local.set $wdv (f32x4.splat (local.get $wd)))
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (local.set $vectorEnd (i32.and (local.get $end) (i32.const -16)))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_u (local.get $i) (local.get $vectorEnd)))
        (local.set $p (v128.load (i32.add (local.get $param) (local.get $i))))
        (local.set $g
          (f32x4.add
            (v128.load (i32.add (local.get $grad) (local.get $i)))
            (f32x4.mul (local.get $wdv) (local.get $p))))
        (local.set $a
          (f32x4.add
            (v128.load (i32.add (local.get $acc) (local.get $i)))
            (f32x4.mul (local.get $g) (local.get $g))))
        (v128.store (i32.add (local.get $acc) (local.get $i)) (local.get $a))
        (v128.store (i32.add (local.get $out) (local.get $i))
          (f32x4.sub
            (local.get $p)
            (f32x4.mul
              (f32x4.div (local.get $g) (f32x4.sqrt (f32x4.add (local.get $a) (local.get $epsv))))
              (local.get $lrv))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $vectors)))
    (block $tailDone
      (loop $tail
        (br_if $tailDone (i32.ge_u (local.get $i) (local.get $end)))
        (local.set $ps (f32.load (i32.add (local.get $param) (local.get $i))))
        (local.set $gs
          (f32.add
            (f32.load (i32.add (local.get $grad) (local.get $i)))
            (f32.mul (local.get $wd) (local.get $ps))))
        (local.set $as
          (f32.add
            (f32.load (i32.add (local.get $acc) (local.get $i)))
            (f32.mul (local.get $gs) (local.get $gs))))
        (f32.store (i32.add (local.get $acc) (local.get $i)) (local.get $as))
        (f32.store (i32.add (local.get $out) (local.get $i))
          (f32.sub
            (local.get $ps)
            (f32.mul
              (f32.div (local.get $gs) (f32.sqrt (f32.add (local.get $as) (local.get $eps))))
              (local.get $lr))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $tail))))
)
