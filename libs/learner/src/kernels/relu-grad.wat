;; The gradient of relu, dy * step(x), in one pass on the memory of TensorFlow.js's wasm backend,
;; where TF.js computes it as three kernels (Step, Cast, Multiply) and three new tensors. It is
;; the product the three give, value for value: step(x) is 1 where x > 0, NaN where x is NaN (as
;; the backend's Step), 0 elsewhere, so a negative dy times 0 stays -0 and an infinite one gives NaN.
(module
  (import "env" "memory" (memory 0))

  ;; out[i] = dy[i] * step(x[i]) for i < n; dy, x and out are byte addresses of float32 arrays.
  (func (export "relu_grad")
    (param $dy i32) (param $x i32) (param $out i32) (param $n i32)
    (local $i i32) (local $vectorEnd i32) (local $at i32) (local $xv v128) (local $xs f32)
    (local.set $vectorEnd (i32.and (local.get $n) (i32.const -4)))
    (block $vectorsDone
      (loop $vectors
        (br_if $vectorsDone (i32.ge_s (local.get $i) (local.get $vectorEnd)))
        (local.set $at (i32.shl (local.get $i) (i32.const 2)))
        (local.set $xv (v128.load (i32.add (local.get $x) (local.get $at))))
        (v128.store (i32.add (local.get $out) (local.get $at))
          (f32x4.mul
            (v128.load (i32.add (local.get $dy) (local.get $at)))
            ;; 1 where x > 0, else 0; then x itself where x is NaN.
            (v128.bitselect
              (local.get $xv)
              (v128.and (f32x4.gt (local.get $xv) (v128.const f32x4 0 0 0 0)) (v128.const f32x4 1 1 1 1))
              (f32x4.ne (local.get $xv) (local.get $xv)))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $vectors)))
    (block $scalarsDone
      (loop $scalars
        (br_if $scalarsDone (i32.ge_s (local.get $i) (local.get $n)))
        (local.set $at (i32.shl (local.get $i) (i32.const 2)))
        (local.set $xs (f32.load (i32.add (local.get $x) (local.get $at))))
        (f32.store (i32.add (local.get $out) (local.get $at))
          (f32.mul
            (f32.load (i32.add (local.get $dy) (local.get $at)))
            (select
              (local.get $xs)
              (select (f32.const 1) (f32.const 0) (f32.gt (local.get $xs) (f32.const 0)))
              (f32.ne (local.get $xs) (local.get $xs)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scalars))))
)
