;; uint8 features to float32, scaled: out[i] = float32(float64(bytes[i]) * scale), the value that
;; `features.set(bytes); features[i] *= scale` gives in JavaScript (a float32 times a double is
;; rounded to the double, then to the float32 stored), so both paths give the same minibatch to
;; the bit. Eight bytes a turn: widened to i32 lanes, converted to float64 pairs, multiplied,
;; demoted and packed back in fours; the last one to seven one by one with the same operations.
;; The module imports its memory: the wasm backend's, where the learner converts a minibatch's
;; bytes straight into its input tensor, or one of its own, into which the reader's conversion
;; copies the bytes at `bytes` and out of which it copies the floats at `out` (byte addresses;
;; n counts elements), growing it first when needed.
(module
  (import "env" "memory" (memory 0))

  (func (export "bytes_to_f32")
    (param $bytes i32) (param $out i32) (param $n i32) (param $scale f64)
    (local $i i32) (local $vectorEnd i32) (local $at i32) (local $wide v128) (local $quad v128)
    (local $s v128)
    (local.set $s (f64x2.splat (local.get $scale)))
    (local.set $vectorEnd (i32.and (local.get $n) (i32.const -8)))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_u (local.get $i) (local.get $vectorEnd)))
        ;; Eight bytes as eight u16 lanes.
        (local.set $wide
          (i16x8.extend_low_i8x16_u (v128.load64_zero (i32.add (local.get $bytes) (local.get $i)))))
        (local.set $at (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2))))
        ;; Elements 0-3, then 4-7: each pair of i32 lanes becomes two float64, scaled, demoted,
        ;; and the two pairs are packed into one float32x4 (written out twice: a call here is
        ;; not inlined, and cost twice the loop's time).
        (local.set $quad (i32x4.extend_low_i16x8_u (local.get $wide)))
        (v128.store (local.get $at)
          (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
            (f32x4.demote_f64x2_zero (f64x2.mul (f64x2.convert_low_i32x4_u (local.get $quad)) (local.get $s)))
            (f32x4.demote_f64x2_zero
              (f64x2.mul
                (f64x2.convert_low_i32x4_u
                  (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $quad) (local.get $quad)))
                (local.get $s)))))
        (local.set $quad (i32x4.extend_high_i16x8_u (local.get $wide)))
        (v128.store (i32.add (local.get $at) (i32.const 16))
          (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
            (f32x4.demote_f64x2_zero (f64x2.mul (f64x2.convert_low_i32x4_u (local.get $quad)) (local.get $s)))
            (f32x4.demote_f64x2_zero
              (f64x2.mul
                (f64x2.convert_low_i32x4_u
                  (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $quad) (local.get $quad)))
                (local.get $s)))))
        (local.set $i (i32.add (local.get $i) (i32.const 8)))
        (br $vectors)))
    (block $scalarsDone
      (loop $scalars
        (br_if $scalarsDone (i32.ge_u (local.get $i) (local.get $n)))
        (f32.store (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2)))
          (f32.demote_f64
            (f64.mul
              (f64.convert_i32_u (i32.load8_u (i32.add (local.get $bytes) (local.get $i))))
              (local.get $scale))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scalars))))

)
