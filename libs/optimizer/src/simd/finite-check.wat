;; Whether every float32 of an array is finite (see finite-check.ts), the check on each gradient
;; a pserver takes: v - v is 0 for a finite v and NaN for NaN and the infinities, and a NaN stays
;; in a sum. Eight elements at a time into two vector sums, then the remaining ones one by one.
;; x is a byte offset, n counts elements; returns 1 when all are finite, else 0.
(module
  (import "env" "memory" (memory 1 65536 shared))

  (func (export "allFinite")
    (param $x i32) (param $n i32) (result i32)
    (local $i i32) (local $vectorEnd i32) (local $p i32) (local $v v128) (local $a v128) (local $b v128) (local $t f32)
    (local.set $vectorEnd (i32.and (local.get $n) (i32.const -8)))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_u (local.get $i) (local.get $vectorEnd)))
        (local.set $p (i32.add (local.get $x) (i32.shl (local.get $i) (i32.const 2))))
        (local.set $v (v128.load (local.get $p)))
        (local.set $a (f32x4.add (local.get $a) (f32x4.sub (local.get $v) (local.get $v))))
        (local.set $v (v128.load offset=16 (local.get $p)))
        (local.set $b (f32x4.add (local.get $b) (f32x4.sub (local.get $v) (local.get $v))))
        (local.set $i (i32.add (local.get $i) (i32.const 8)))
        (br $vectors)))
    (block $tailDone
      (loop $tail
        (br_if $tailDone (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $t (f32.load (i32.add (local.get $x) (i32.shl (local.get $i) (i32.const 2)))))
        (local.set $a (f32x4.add (local.get $a) (f32x4.splat (f32.sub (local.get $t) (local.get $t)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $tail)))
    (i32x4.all_true (f32x4.eq (f32x4.add (local.get $a) (local.get $b)) (v128.const f32x4 0 0 0 0))))
)
