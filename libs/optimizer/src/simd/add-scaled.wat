;; A parameter moved by a scaled delta (a `local` round's step on the pserver, see
;; add-scaled.ts), in float64 like the plain JavaScript loop and rounded to float32 once, so the
;; two agree to the bit:
;;   out[i] = float32(param[i] + scale * delta[i])
;; Arrays are byte offsets of float32 arrays, n counts elements; `out` may be `param`. Four
;; elements at a time (one float32 vector, two float64 vectors), then the remaining one to three
;; one by one with the same operations.
(module
  (import "env" "memory" (memory 1 65536 shared))

  (func (export "addScaled")
    (param $out i32) (param $param i32) (param $delta i32) (param $n i32) (param $scale f64)
    (local $i i32) (local $end i32) (local $vectorEnd i32) (local $sv v128) (local $p v128) (local $d v128)
    (local.set $sv (f64x2.splat (local.get $scale)))
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (local.set $vectorEnd (i32.and (local.get $end) (i32.const -16)))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_u (local.get $i) (local.get $vectorEnd)))
        (local.set $p (v128.load (i32.add (local.get $param) (local.get $i))))
        (local.set $d (v128.load (i32.add (local.get $delta) (local.get $i))))
        (v128.store (i32.add (local.get $out) (local.get $i))
          (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23
            (f32x4.demote_f64x2_zero
              (f64x2.add
                (f64x2.promote_low_f32x4 (local.get $p))
                (f64x2.mul (local.get $sv) (f64x2.promote_low_f32x4 (local.get $d)))))
            (f32x4.demote_f64x2_zero
              (f64x2.add
                (f64x2.promote_low_f32x4
                  (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $p) (local.get $p)))
                (f64x2.mul
                  (local.get $sv)
                  (f64x2.promote_low_f32x4
                    (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $d) (local.get $d))))))))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br $vectors)))
    (block $tailDone
      (loop $tail
        (br_if $tailDone (i32.ge_u (local.get $i) (local.get $end)))
        (f32.store (i32.add (local.get $out) (local.get $i))
          (f32.demote_f64
            (f64.add
              (f64.promote_f32 (f32.load (i32.add (local.get $param) (local.get $i))))
              (f64.mul
                (local.get $scale)
                (f64.promote_f32 (f32.load (i32.add (local.get $delta) (local.get $i))))))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $tail))))
)
