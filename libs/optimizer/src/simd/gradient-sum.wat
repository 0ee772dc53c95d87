;; The sample-weighted gradient sum of a synchronous step (see gradient-sum.ts), in float64
;; like the plain JavaScript sum, so both round to the same float32 average:
;;   scale:      sum[i] = grad[i] * w + 0      (the first contribution; + 0 turns -0 into 0,
;;                                              as adding to a zeroed sum does)
;;   accumulate: sum[i] = sum[i] + grad[i] * w
;;   average:    out[i] = float32(sum[i] / total)
;; grad and out are float32, sum float64; arrays are byte offsets, n counts elements. Four
;; elements at a time (one float32 vector, two float64 vectors), then the remaining one to three
;; one by one with the same operations.
(module
  (import "env" "memory" (memory 1 65536 shared))

  (func (export "scale")
    (param $sum i32) (param $grad i32) (param $n i32) (param $w f64)
    (local $i i32) (local $vectorEnd i32) (local $wv v128) (local $zero v128) (local $g v128) (local $s i32)
    (local.set $wv (f64x2.splat (local.get $w)))
    (local.set $zero (f64x2.splat (f64.const 0)))
    (local.set $vectorEnd (i32.and (local.get $n) (i32.const -4)))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_u (local.get $i) (local.get $vectorEnd)))
        (local.set $g (v128.load (i32.add (local.get $grad) (i32.shl (local.get $i) (i32.const 2)))))
        (local.set $s (i32.add (local.get $sum) (i32.shl (local.get $i) (i32.const 3))))
        (v128.store (local.get $s)
          (f64x2.add (f64x2.mul (f64x2.promote_low_f32x4 (local.get $g)) (local.get $wv)) (local.get $zero)))
        (v128.store offset=16 (local.get $s)
          (f64x2.add
            (f64x2.mul
              (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $g) (local.get $g)))
              (local.get $wv))
            (local.get $zero)))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $vectors)))
    (block $tailDone
      (loop $tail
        (br_if $tailDone (i32.ge_u (local.get $i) (local.get $n)))
        (f64.store (i32.add (local.get $sum) (i32.shl (local.get $i) (i32.const 3)))
          (f64.add
            (f64.mul
              (f64.promote_f32 (f32.load (i32.add (local.get $grad) (i32.shl (local.get $i) (i32.const 2)))))
              (local.get $w))
            (f64.const 0)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $tail))))

  (func (export "accumulate")
    (param $sum i32) (param $grad i32) (param $n i32) (param $w f64)
    (local $i i32) (local $vectorEnd i32) (local $wv v128) (local $g v128) (local $s i32) (local $t i32)
    (local.set $wv (f64x2.splat (local.get $w)))
    (local.set $vectorEnd (i32.and (local.get $n) (i32.const -4)))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_u (local.get $i) (local.get $vectorEnd)))
        (local.set $g (v128.load (i32.add (local.get $grad) (i32.shl (local.get $i) (i32.const 2)))))
        (local.set $s (i32.add (local.get $sum) (i32.shl (local.get $i) (i32.const 3))))
        (v128.store (local.get $s)
          (f64x2.add
            (v128.load (local.get $s))
            (f64x2.mul (f64x2.promote_low_f32x4 (local.get $g)) (local.get $wv))))
        (v128.store offset=16 (local.get $s)
          (f64x2.add
            (v128.load offset=16 (local.get $s))
            (f64x2.mul
              (f64x2.promote_low_f32x4 (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $g) (local.get $g)))
              (local.get $wv))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $vectors)))
    (block $tailDone
      (loop $tail
        (br_if $tailDone (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $t (i32.add (local.get $sum) (i32.shl (local.get $i) (i32.const 3))))
        (f64.store (local.get $t)
          (f64.add
            (f64.load (local.get $t))
            (f64.mul
              (f64.promote_f32 (f32.load (i32.add (local.get $grad) (i32.shl (local.get $i) (i32.const 2)))))
              (local.get $w))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $tail))))

  (func (export "average")
    (param $out i32) (param $sum i32) (param $n i32) (param $total f64)
    (local $i i32) (local $vectorEnd i32) (local $tv v128) (local $s i32)
    (local.set $tv (f64x2.splat (local.get $total)))
    (local.set $vectorEnd (i32.and (local.get $n) (i32.const -4)))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_u (local.get $i) (local.get $vectorEnd)))
        (local.set $s (i32.add (local.get $sum) (i32.shl (local.get $i) (i32.const 3))))
        (v128.store (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2)))
          (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
            (f32x4.demote_f64x2_zero (f64x2.div (v128.load (local.get $s)) (local.get $tv)))
            (f32x4.demote_f64x2_zero (f64x2.div (v128.load offset=16 (local.get $s)) (local.get $tv)))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $vectors)))
    (block $tailDone
      (loop $tail
        (br_if $tailDone (i32.ge_u (local.get $i) (local.get $n)))
        (f32.store (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2)))
          (f32.demote_f64
            (f64.div (f64.load (i32.add (local.get $sum) (i32.shl (local.get $i) (i32.const 3)))) (local.get $total))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $tail))))
)
