;; Plain SGD over float32 arrays in the imported kernel heap (see sgd.ts), with L2 weight decay:
;;   out[i] = param[i] - lr * (grad[i] + wd * param[i])
;; Arrays are byte offsets, n counts elements; four lanes at a time, then the remaining one to
;; three elements one by one with the same float32 operations. `out` may be `param`.
(module
  (import "env" "memory" (memory 1 65536 shared))

  (func (export "sgd")
    (param $out i32) (param $param i32) (param $grad i32) (param $n i32) (param $lr f32) (param $wd f32)
    (local $i i32) (local $end i32) (local $vectorEnd i32) (local $lrv v128) (local $wdv v128)
    (local $p v128) (local $ps f32)
    (local.set $lrv (f32x4.splat (local.get $lr)))
    (local.set $wdv (f32x4.splat (local.get $wd)))
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (local.set $vectorEnd (i32.and (local.get $end) (i32.const -16)))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_u (local.get $i) (local.get $vectorEnd)))
        (local.set $p (v128.load (i32.add (local.get $param) (local.get $i))))
        (v128.store (i32.add (local.get $out) (local.get $i))
          (f32x4.sub
            (local.get $p)
            (f32x4.mul (local.get $lrv)
              (f32x4.add
                (v128.load (i32.add (local.get $grad) (local.get $i)))
                (f32x4.mul (local.get $wdv) (local.get $p))))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $vectors)))
    (block $tailDone
      (loop $tail
        (br_if $tailDone (i32.ge_u (local.get $i) (local.get $end)))
        (local.set $ps (f32.load (i32.add (local.get $param) (local.get $i))))
        (f32.store (i32.add (local.get $out) (local.get $i))
          (f32.sub
            (local.get $ps)
            (f32.mul (local.get $lr)
              (f32.add
                (f32.load (i32.add (local.get $grad) (local.get $i)))
                (f32.mul (local.get $wd) (local.get $ps))))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $tail))))
)
