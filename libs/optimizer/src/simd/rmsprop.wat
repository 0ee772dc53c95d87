;; RMSProp over float32 arrays in the imported kernel heap (see rmsprop.ts), in the order of the
;; plain JavaScript kernel's operations, with g[i] = grad[i] + wd * param[i]:
;;   rmsprop:   ms[i] = ms[i] * d + g[i] * g[i] * c
;;              mom[i] = mom[i] * m + (g[i] * lr) / sqrt(ms[i] + eps)
;;              out[i] = param[i] - mom[i]
;;   centered:  as rmsprop, with mg[i] = mg[i] * d + g[i] * c and
;;              mom[i] = mom[i] * m + (g[i] * lr) / sqrt(max(ms[i] - mg[i] * mg[i], 0) + eps)
;; (each square floored, see below)
;; where d is the decay and c = 1 - d, computed by the caller. Arrays are byte offsets, n counts
;; elements; four lanes at a time, then the remaining one to three elements one by one with the
;; same float32 operations. `out` may be `param`.
;;
;; A mean square, mean gradient or moment below the smallest normal float32 (2^-126 in
;; magnitude) is stored as zero, as in adam.wat: state that decays while a gradient stays zero
;; would otherwise sink into the subnormal range, where x86 takes a microcode assist per
;; operation, and stay there. The squares are floored as in adam.wat (SQUARED_GRADIENT_FLOOR in
;; kernel.ts): the gradient, and the mean gradient, are taken as at least 2^-56 in magnitude where
;; they are squared (`f32x4.pmax`, which keeps NaN), since the square of one under 2^-63 is
;; subnormal; so g * g * c, and with it ms, is at least 2^-126 for c from 2^-14, and the
;; subtracted mean square of the centered form is not subnormal either. Over the example MLP's
;; 101,770 parameters with gradients of 1e-20, the step took 279 us without the floor and 75 us
;; with it (65 and 76 us with normal gradients), the centered one 461 and 99 us. The variance is held
;; at zero or above with `f32x4.pmax` too, which keeps NaN as `f32x4.max` does, at less cost.
(module
  (import "env" "memory" (memory 1 65536 shared))

  (func (export "rmsprop")
    (param $out i32) (param $param i32) (param $grad i32) (param $ms i32) (param $mom i32) (param $n i32)
    (param $lr f32) (param $d f32) (param $c f32) (param $m f32) (param $eps f32) (param $wd f32)
    (local $i i32) (local $end i32) (local $vectorEnd i32)
    (local $lrv v128) (local $dv v128) (local $cv v128) (local $mv v128) (local $epsv v128) (local $wdv v128)
    (local $p v128) (local $g v128) (local $s v128) (local $o v128)
    (local $ps f32) (local $gs f32) (local $ss f32) (local $os f32)
    (local $tinyv v128) (local $gFloor v128) (local $q v128) (local $qs f32)
    (local.set $tinyv (f32x4.splat (f32.const 0x1p-126)))
    (local.set $gFloor (f32x4.splat (f32.const 0x1p-56)))
    (local.set $lrv (f32x4.splat (local.get $lr)))
    (local.set $dv (f32x4.splat (local.get $d)))
    (local.set $cv (f32x4.splat (local.get $c)))
    (local.set $mv (f32x4.splat (local.get $m)))
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
        (local.set $q (f32x4.pmax (f32x4.abs (local.get $g)) (local.get $gFloor)))
        (local.set $s
          (f32x4.add
            (f32x4.mul (v128.load (i32.add (local.get $ms) (local.get $i))) (local.get $dv))
            (f32x4.mul (f32x4.mul (local.get $q) (local.get $q)) (local.get $cv))))
        (local.set $o
          (f32x4.add
            (f32x4.mul (v128.load (i32.add (local.get $mom) (local.get $i))) (local.get $mv))
            (f32x4.div
              (f32x4.mul (local.get $g) (local.get $lrv))
              (f32x4.sqrt (f32x4.add (local.get $s) (local.get $epsv))))))
        (local.set $s
          (v128.andnot (local.get $s) (f32x4.lt (f32x4.abs (local.get $s)) (local.get $tinyv))))
        (v128.store (i32.add (local.get $ms) (local.get $i)) (local.get $s))
        (local.set $o
          (v128.andnot (local.get $o) (f32x4.lt (f32x4.abs (local.get $o)) (local.get $tinyv))))
        (v128.store (i32.add (local.get $mom) (local.get $i)) (local.get $o))
        (v128.store (i32.add (local.get $out) (local.get $i)) (f32x4.sub (local.get $p) (local.get $o)))
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
        (local.set $qs (f32.abs (local.get $gs)))
        (local.set $qs (select (f32.const 0x1p-56) (local.get $qs) (f32.lt (local.get $qs) (f32.const 0x1p-56))))
        (local.set $ss
          (f32.add
            (f32.mul (f32.load (i32.add (local.get $ms) (local.get $i))) (local.get $d))
            (f32.mul (f32.mul (local.get $qs) (local.get $qs)) (local.get $c))))
        (local.set $os
          (f32.add
            (f32.mul (f32.load (i32.add (local.get $mom) (local.get $i))) (local.get $m))
            (f32.div
              (f32.mul (local.get $gs) (local.get $lr))
              (f32.sqrt (f32.add (local.get $ss) (local.get $eps))))))
        (local.set $ss
          (select (f32.const 0) (local.get $ss) (f32.lt (f32.abs (local.get $ss)) (f32.const 0x1p-126))))
        (f32.store (i32.add (local.get $ms) (local.get $i)) (local.get $ss))
        (local.set $os
          (select (f32.const 0) (local.get $os) (f32.lt (f32.abs (local.get $os)) (f32.const 0x1p-126))))
        (f32.store (i32.add (local.get $mom) (local.get $i)) (local.get $os))
        (f32.store (i32.add (local.get $out) (local.get $i)) (f32.sub (local.get $ps) (local.get $os)))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $tail))))

  (func (export "centered")
    (param $out i32) (param $param i32) (param $grad i32) (param $ms i32) (param $mom i32) (param $mg i32)
    (param $n i32)
    (param $lr f32) (param $d f32) (param $c f32) (param $m f32) (param $eps f32) (param $wd f32)
    (local $i i32) (local $end i32) (local $vectorEnd i32)
    (local $lrv v128) (local $dv v128) (local $cv v128) (local $mv v128) (local $epsv v128) (local $wdv v128)
    (local $zero v128) (local $p v128) (local $g v128) (local $s v128) (local $a v128) (local $o v128)
    (local $ps f32) (local $gs f32) (local $ss f32) (local $as f32) (local $os f32)
    (local $tinyv v128) (local $gFloor v128) (local $q v128) (local $qs f32) (local $aq v128) (local $aqs f32)
    (local.set $tinyv (f32x4.splat (f32.const 0x1p-126)))
    (local.set $gFloor (f32x4.splat (f32.const 0x1p-56)))
    (local.set $lrv (f32x4.splat (local.get $lr)))
    (local.set $dv (f32x4.splat (local.get $d)))
    (local.set $cv (f32x4.splat (local.get $c)))
    (local.set $mv (f32x4.splat (local.get $m)))
    (local.set $epsv (f32x4.splat (local.get $eps)))
    (local.set $wdv (f32x4.splat (local.get $wd)))
    (local.set $zero (f32x4.splat (f32.const 0)))
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
        (local.set $q (f32x4.pmax (f32x4.abs (local.get $g)) (local.get $gFloor)))
        (local.set $s
          (f32x4.add
            (f32x4.mul (v128.load (i32.add (local.get $ms) (local.get $i))) (local.get $dv))
            (f32x4.mul (f32x4.mul (local.get $q) (local.get $q)) (local.get $cv))))
        (local.set $a
          (f32x4.add
            (f32x4.mul (v128.load (i32.add (local.get $mg) (local.get $i))) (local.get $dv))
            (f32x4.mul (local.get $g) (local.get $cv))))
        (local.set $aq (f32x4.pmax (f32x4.abs (local.get $a)) (local.get $gFloor)))
        (local.set $o
          (f32x4.add
            (f32x4.mul (v128.load (i32.add (local.get $mom) (local.get $i))) (local.get $mv))
            (f32x4.div
              (f32x4.mul (local.get $g) (local.get $lrv))
              (f32x4.sqrt
                (f32x4.add
                  (f32x4.pmax (f32x4.sub (local.get $s) (f32x4.mul (local.get $aq) (local.get $aq))) (local.get $zero))
                  (local.get $epsv))))))
        (local.set $s
          (v128.andnot (local.get $s) (f32x4.lt (f32x4.abs (local.get $s)) (local.get $tinyv))))
        (v128.store (i32.add (local.get $ms) (local.get $i)) (local.get $s))
        (local.set $a
          (v128.andnot (local.get $a) (f32x4.lt (f32x4.abs (local.get $a)) (local.get $tinyv))))
        (v128.store (i32.add (local.get $mg) (local.get $i)) (local.get $a))
        (local.set $o
          (v128.andnot (local.get $o) (f32x4.lt (f32x4.abs (local.get $o)) (local.get $tinyv))))
        (v128.store (i32.add (local.get $mom) (local.get $i)) (local.get $o))
        (v128.store (i32.add (local.get $out) (local.get $i)) (f32x4.sub (local.get $p) (local.get $o)))
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
        (local.set $qs (f32.abs (local.get $gs)))
        (local.set $qs (select (f32.const 0x1p-56) (local.get $qs) (f32.lt (local.get $qs) (f32.const 0x1p-56))))
        (local.set $ss
          (f32.add
            (f32.mul (f32.load (i32.add (local.get $ms) (local.get $i))) (local.get $d))
            (f32.mul (f32.mul (local.get $qs) (local.get $qs)) (local.get $c))))
        (local.set $as
          (f32.add
            (f32.mul (f32.load (i32.add (local.get $mg) (local.get $i))) (local.get $d))
            (f32.mul (local.get $gs) (local.get $c))))
        (local.set $aqs (f32.abs (local.get $as)))
        (local.set $aqs (select (f32.const 0x1p-56) (local.get $aqs) (f32.lt (local.get $aqs) (f32.const 0x1p-56))))
        (local.set $os
          (f32.add
            (f32.mul (f32.load (i32.add (local.get $mom) (local.get $i))) (local.get $m))
            (f32.div
              (f32.mul (local.get $gs) (local.get $lr))
              (f32.sqrt
                (f32.add
                  (f32.max (f32.sub (local.get $ss) (f32.mul (local.get $aqs) (local.get $aqs))) (f32.const 0))
                  (local.get $eps))))))
        (local.set $ss
          (select (f32.const 0) (local.get $ss) (f32.lt (f32.abs (local.get $ss)) (f32.const 0x1p-126))))
        (f32.store (i32.add (local.get $ms) (local.get $i)) (local.get $ss))
        (local.set $as
          (select (f32.const 0) (local.get $as) (f32.lt (f32.abs (local.get $as)) (f32.const 0x1p-126))))
        (f32.store (i32.add (local.get $mg) (local.get $i)) (local.get $as))
        (local.set $os
          (select (f32.const 0) (local.get $os) (f32.lt (f32.abs (local.get $os)) (f32.const 0x1p-126))))
        (f32.store (i32.add (local.get $mom) (local.get $i)) (local.get $os))
        (f32.store (i32.add (local.get $out) (local.get $i)) (f32.sub (local.get $ps) (local.get $os)))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $tail))))
)
