;; Adagrad over float32 arrays in the imported kernel heap (see adagrad.ts), in the order of the
;; plain JavaScript kernel's operations:
;;   g[i] = grad[i] + wd * param[i]
;;   acc[i] = acc[i] + g[i] * g[i]
;;   out[i] = param[i] - (g[i] / sqrt(acc[i] + eps)) * lr
;; Arrays are byte offsets, n counts elements; four lanes at a time, then the remaining one to
;; three elements one by one with the same float32 operations. `out` may be `param`.
;;
;; The gradient is taken as at least 2^-56 in magnitude where it is squared (`f32x4.pmax`, which
;; keeps NaN), as in adam.wat (SQUARED_GRADIENT_FLOOR in kernel.ts): the square of a gradient under
;; 2^-63 is subnormal, and each operation on a subnormal float32 costs x86 a microcode assist. Over
;; the example MLP's 101,770 parameters with gradients of 1e-20, the step took 181 us without the
;; floor and 49 us with it, as it does with normal gradients. What the floor adds to the sum of
;; squares, 2^-112 a step, is far below epsilon under the square root.
(module
  (import "env" "memory" (memory 1 65536 shared))

  (func (export "adagrad")
    (param $out i32) (param $param i32) (param $grad i32) (param $acc i32) (param $n i32)
    (param $lr f32) (param $eps f32) (param $wd f32)
    (local $i i32) (local $end i32) (local $vectorEnd i32)
    (local $lrv v128) (local $epsv v128) (local $wdv v128) (local $p v128) (local $g v128) (local $a v128)
    (local $ps f32) (local $gs f32) (local $as f32)
    (local $gFloor v128) (local $q v128) (local $qs f32)
    (local.set $gFloor (f32x4.splat (f32.const 0x1p-56)))
    (local.set $lrv (f32x4.splat (local.get $lr)))
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
        (local.set $a
          (f32x4.add
            (v128.load (i32.add (local.get $acc) (local.get $i)))
            (f32x4.mul (local.get $q) (local.get $q))))
        (v128.store (i32.add (local.get $acc) (local.get $i)) (local.get $a))
        (v128.store (i32.add (local.get $out) (local.get $i))
          (f32x4.sub
            (local.get $p)
            (f32x4.mul
              (f32x4.div (local.get $g) (f32x4.sqrt (f32x4.add (local.get $a) (local.get $epsv))))
              (local.get $lrv))))
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
        (local.set $as
          (f32.add
            (f32.load (i32.add (local.get $acc) (local.get $i)))
            (f32.mul (local.get $qs) (local.get $qs))))
        (f32.store (i32.add (local.get $acc) (local.get $i)) (local.get $as))
        (f32.store (i32.add (local.get $out) (local.get $i))
          (f32.sub
            (local.get $ps)
            (f32.mul
              (f32.div (local.get $gs) (f32.sqrt (f32.add (local.get $as) (local.get $eps))))
              (local.get $lr))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $tail))))
)
