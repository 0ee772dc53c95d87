;; Adding a bias vector to every row of a float32 tensor whose last axis is the channel (a layer's
;; bias, broadcast over the batch and the spatial axes), on the memory of TensorFlow.js's wasm
;; backend, and the same followed by relu (a dense layer's product, bias and activation in one).
;; Four channels at a time; channels past the last multiple of four one by one.
(module
  (import "env" "memory" (memory 0))

  ;; out[r, c] = x[r, c] + bias[c] for r < rows, c < channels; x, bias and out are byte
  ;; addresses of float32 arrays, and out may be x.
  (func (export "bias_add")
    (param $x i32) (param $bias i32) (param $out i32) (param $rows i32) (param $channels i32)
    (local $r i32) (local $c i32) (local $vectorEnd i32) (local $rowBytes i32) (local $at i32)
    (local.set $vectorEnd (i32.and (local.get $channels) (i32.const -4)))
    (local.set $rowBytes (i32.shl (local.get $channels) (i32.const 2)))
    (block $done
      (br_if $done (i32.le_s (local.get $rows) (i32.const 0)))
      (loop $eachRow
        (local.set $c (i32.const 0))
        (block $vectorsDone
          (loop $vectors
            (br_if $vectorsDone (i32.ge_s (local.get $c) (local.get $vectorEnd)))
            (local.set $at (i32.shl (local.get $c) (i32.const 2)))
            (v128.store (i32.add (local.get $out) (local.get $at))
              (f32x4.add
                (v128.load (i32.add (local.get $x) (local.get $at)))
                (v128.load (i32.add (local.get $bias) (local.get $at)))))
            (local.set $c (i32.add (local.get $c) (i32.const 4)))
            (br $vectors)))
        (block $scalarsDone
          (loop $scalars
            (br_if $scalarsDone (i32.ge_s (local.get $c) (local.get $channels)))
            (local.set $at (i32.shl (local.get $c) (i32.const 2)))
            (f32.store (i32.add (local.get $out) (local.get $at))
              (f32.add
                (f32.load (i32.add (local.get $x) (local.get $at)))
                (f32.load (i32.add (local.get $bias) (local.get $at)))))
            (local.set $c (i32.add (local.get $c) (i32.const 1)))
            (br $scalars)))
        (local.set $x (i32.add (local.get $x) (local.get $rowBytes)))
        (local.set $out (i32.add (local.get $out) (local.get $rowBytes)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br_if $eachRow (i32.lt_s (local.get $r) (local.get $rows))))))

  ;; out[r, c] = relu(x[r, c] + bias[c]), where relu(v) is 0 when v < 0 and v otherwise (so NaN
  ;; and -0 stay as they are, as in a plain `v < 0 ? 0 : v`); arguments as for bias_add.
  (func (export "bias_relu")
    (param $x i32) (param $bias i32) (param $out i32) (param $rows i32) (param $channels i32)
    (local $r i32) (local $c i32) (local $vectorEnd i32) (local $rowBytes i32) (local $at i32)
    (local $v f32)
    (local.set $vectorEnd (i32.and (local.get $channels) (i32.const -4)))
    (local.set $rowBytes (i32.shl (local.get $channels) (i32.const 2)))
    (block $done
      (br_if $done (i32.le_s (local.get $rows) (i32.const 0)))
      (loop $eachRow
        (local.set $c (i32.const 0))
        (block $vectorsDone
          (loop $vectors
            (br_if $vectorsDone (i32.ge_s (local.get $c) (local.get $vectorEnd)))
            (local.set $at (i32.shl (local.get $c) (i32.const 2)))
            ;; pmax(v, 0) is `v < 0 ? 0 : v`, lane by lane.
            (v128.store (i32.add (local.get $out) (local.get $at))
              (f32x4.pmax
                (f32x4.add
                  (v128.load (i32.add (local.get $x) (local.get $at)))
                  (v128.load (i32.add (local.get $bias) (local.get $at))))
                (v128.const f32x4 0 0 0 0)))
            (local.set $c (i32.add (local.get $c) (i32.const 4)))
            (br $vectors)))
        (block $scalarsDone
          (loop $scalars
            (br_if $scalarsDone (i32.ge_s (local.get $c) (local.get $channels)))
            (local.set $at (i32.shl (local.get $c) (i32.const 2)))
            (local.set $v
              (f32.add
                (f32.load (i32.add (local.get $x) (local.get $at)))
                (f32.load (i32.add (local.get $bias) (local.get $at)))))
            (f32.store (i32.add (local.get $out) (local.get $at))
              (select (f32.const 0) (local.get $v) (f32.lt (local.get $v) (f32.const 0))))
            (local.set $c (i32.add (local.get $c) (i32.const 1)))
            (br $scalars)))
        (local.set $x (i32.add (local.get $x) (local.get $rowBytes)))
        (local.set $out (i32.add (local.get $out) (local.get $rowBytes)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br_if $eachRow (i32.lt_s (local.get $r) (local.get $rows))))))
)
