;; SGD with momentum over float32 arrays in the imported kernel heap (see momentum.ts), with L2
;; weight decay g[i] = grad[i] + wd * param[i]:
;;   momentum:  acc[i] = m * acc[i] + g[i];  out[i] = param[i] - lr * acc[i]
;;   nesterov:  acc[i] = m * acc[i] + g[i];  out[i] = param[i] - lr * (g[i] + m * acc[i])
;; Arrays are byte offsets, n counts elements; four lanes at a time, then the remaining one to
;; three elements one by one with the same float32 operations. `out` may be `param`.
;;
;; An accumulated momentum below the smallest normal float32 (2^-126 in magnitude) is
;; stored as zero, as in adam.wat: state that decays while a gradient stays zero would otherwise
;; sink into the subnormal range, where x86 takes a microcode assist per operation, and stay
;; there. NaN is kept.
(module
  (import "env" "memory" (memory 1 65536 shared))

  (func (export "momentum")
    (param $out i32) (param $param i32) (param $grad i32) (param $acc i32) (param $n i32)
    (param $lr f32) (param $m f32) (param $wd f32)
    (local $i i32) (local $end i32) (local $vectorEnd i32)
    (local $lrv v128) (local $mv v128) (local $wdv v128) (local $p v128) (local $a v128)
    (local $ps f32) (local $as f32)
    (local $tinyv v128)
    (local.set $tinyv (f32x4.splat (f32.const 0x1p-126)))
    (local.set $lrv (f32x4.splat (local.get $lr)))
    (local.set $mv (f32x4.splat (local.get $m)))
    (local.set $wdv (f32x4.splat (local.get $wd)))
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (local.set $vectorEnd (i32.and (local.get $end) (i32.const -16)))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_u (local.get $i) (local.get $vectorEnd)))
        (local.set $p (v128.load (i32.add (local.get $param) (local.get $i))))
        (local.set $a
          (f32x4.add
            (f32x4.mul (local.get $mv) (v128.load (i32.add (local.get $acc) (local.get $i))))
            (f32x4.add
              (v128.load (i32.add (local.get $grad) (local.get $i)))
              (f32x4.mul (local.get $wdv) (local.get $p)))))
        (local.set $a
          (v128.andnot (local.get $a) (f32x4.lt (f32x4.abs (local.get $a)) (local.get $tinyv))))
        (v128.store (i32.add (local.get $acc) (local.get $i)) (local.get $a))
        (v128.store (i32.add (local.get $out) (local.get $i))
          (f32x4.sub (local.get $p) (f32x4.mul (local.get $lrv) (local.get $a))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $vectors)))
    (block $tailDone
      (loop $tail
        (br_if $tailDone (i32.ge_u (local.get $i) (local.get $end)))
        (local.set $ps (f32.load (i32.add (local.get $param) (local.get $i))))
        (local.set $as
          (f32.add
            (f32.mul (local.get $m) (f32.load (i32.add (local.get $acc) (local.get $i))))
            (f32.add
              (f32.load (i32.add (local.get $grad) (local.get $i)))
              (f32.mul (local.get $wd) (local.get $ps)))))
        (local.set $as
          (select (f32.const 0) (local.get $as) (f32.lt (f32.abs (local.get $as)) (f32.const 0x1p-126))))
        (f32.store (i32.add (local.get $acc) (local.get $i)) (local.get $as))
        (f32.store (i32.add (local.get $out) (local.get $i))
          (f32.sub (local.get $ps) (f32.mul (local.get $lr) (local.get $as))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $tail))))

  (func (export "nesterov")
    (param $out i32) (param $param i32) (param $grad i32) (param $acc i32) (param $n i32)
    (param $lr f32) (param $m f32) (param $wd f32)
    (local $i i32) (local $end i32) (local $vectorEnd i32)
    (local $lrv v128) (local $mv v128) (local $wdv v128) (local $p v128) (local $g v128) (local $a v128)
    (local $ps f32) (local $gs f32) (local $as f32)
    (local $tinyv v128)
    (local.set $tinyv (f32x4.splat (f32.const 0x1p-126)))
    (local.set $lrv (f32x4.splat (local.get $lr)))
    (local.set $mv (f32x4.splat (local.get $m)))
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
            (f32x4.mul (local.get $mv) (v128.load (i32.add (local.get $acc) (local.get $i))))
            (local.get $g)))
        (local.set $a
          (v128.andnot (local.get $a) (f32x4.lt (f32x4.abs (local.get $a)) (local.get $tinyv))))
        (v128.store (i32.add (local.get $acc) (local.get $i)) (local.get $a))
        (v128.store (i32.add (local.get $out) (local.get $i))
          (f32x4.sub
            (local.get $p)
            (f32x4.mul (local.get $lrv) (f32x4.add (local.get $g) (f32x4.mul (local.get $mv) (local.get $a))))))
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
            (f32.mul (local.get $m) (f32.load (i32.add (local.get $acc) (local.get $i))))
            (local.get $gs)))
        (local.set $as
          (select (f32.const 0) (local.get $as) (f32.lt (f32.abs (local.get $as)) (f32.const 0x1p-126))))
        (f32.store (i32.add (local.get $acc) (local.get $i)) (local.get $as))
        (f32.store (i32.add (local.get $out) (local.get $i))
          (f32.sub
            (local.get $ps)
            (f32.mul (local.get $lr) (f32.add (local.get $gs) (f32.mul (local.get $m) (local.get $as))))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $tail))))
)
