;; Summing the rows of a float32 tensor whose last axis is the channel (a layer's bias gradient:
;; the sum over the batch and the spatial axes), on the memory of TensorFlow.js's wasm backend.
;; Four channels at a time, each summed in float32 from zero in row order; channels past the
;; last multiple of four one by one.
(module
  (import "env" "memory" (memory 0))

  ;; out[c] = sum over r < rows of x[r, c], for c < channels; x and out are byte addresses of
  ;; float32 arrays.
  (func (export "sum_rows")
    (param $x i32) (param $out i32) (param $rows i32) (param $channels i32)
    (local $r i32) (local $c i32) (local $vectorEnd i32) (local $rowBytes i32) (local $p i32)
    (local $acc v128) (local $sum f32)
    (local.set $vectorEnd (i32.and (local.get $channels) (i32.const -4)))
    (local.set $rowBytes (i32.shl (local.get $channels) (i32.const 2)))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_s (local.get $c) (local.get $vectorEnd)))
        (local.set $acc (v128.const f32x4 0 0 0 0))
        (local.set $p (i32.add (local.get $x) (i32.shl (local.get $c) (i32.const 2))))
        (local.set $r (i32.const 0))
        (block $rowsDone
          (loop $eachRow
            (br_if $rowsDone (i32.ge_s (local.get $r) (local.get $rows)))
            (local.set $acc (f32x4.add (local.get $acc) (v128.load (local.get $p))))
            (local.set $p (i32.add (local.get $p) (local.get $rowBytes)))
            (local.set $r (i32.add (local.get $r) (i32.const 1)))
            (br $eachRow)))
        (v128.store (i32.add (local.get $out) (i32.shl (local.get $c) (i32.const 2))) (local.get $acc))
        (local.set $c (i32.add (local.get $c) (i32.const 4)))
        (br $vectors)))
    (block $scalarsDone
      (loop $scalars
        (br_if $scalarsDone (i32.ge_s (local.get $c) (local.get $channels)))
        (local.set $sum (f32.const 0))
        (local.set $p (i32.add (local.get $x) (i32.shl (local.get $c) (i32.const 2))))
        (local.set $r (i32.const 0))
        (block $rowsDone
          (loop $eachRow
            (br_if $rowsDone (i32.ge_s (local.get $r) (local.get $rows)))
            (local.set $sum (f32.add (local.get $sum) (f32.load (local.get $p))))
            (local.set $p (i32.add (local.get $p) (local.get $rowBytes)))
            (local.set $r (i32.add (local.get $r) (i32.const 1)))
            (br $eachRow)))
        (f32.store (i32.add (local.get $out) (i32.shl (local.get $c) (i32.const 2))) (local.get $sum))
        (local.set $c (i32.add (local.get $c) (i32.const 1)))
        (br $scalars))))
)
