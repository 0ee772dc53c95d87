;; Adam over float32 arrays in the imported kernel heap (see adam.ts), in the order of the plain
;; JavaScript kernel's operations:
;;   g[i] = grad[i] + l2 * param[i]
;;   m[i] = b1 * m[i] + c1 * g[i]
;;   v[i] = b2 * v[i] + c2 * g[i] * g[i]
;;   out[i] = param[i] - param[i] * decay - (step * m[i]) / (sqrt(v[i]) + epsHat)
;; where c = 1 - b, and the bias corrections k = 1 - b^t, computed by the caller as TensorFlow.js
;; does, are folded into step = lr * sqrt(k2) / k1 and epsHat = eps * sqrt(k2) (the order of
;; TensorFlow's own ApplyAdam kernel): the same update as lr * (m / k1) / (sqrt(v / k2) + eps)
;; up to rounding, at one division and one square root per element instead of three and one. `l2` is the
;; L2 weight decay of `adam` and `decay` the decoupled weight decay of `adamw` (adamw.ts); each
;; passes zero for the other. A decay of zero adds nothing, not even a zero times the parameter
;; (as in the plain kernel): with both zero, the case of plain Adam, the vector loop is one
;; without them, as the arithmetic, not the memory, sets the pace over arrays that fit the
;; caches (`npm run bench -- kernels` times the example MLP's size). Arrays are byte offsets, n
;; counts elements; four lanes at a time,
;; then the remaining one to three elements one by one with the same float32 operations. `out`
;; may be `param`.
;;
;; No operation here makes a subnormal float32 in the course of training, where x86 takes a
;; microcode assist of about a hundred cycles (TensorFlow runs its CPU kernels with flush-to-zero
;; instead, which WebAssembly cannot ask for). Two floors, in magnitude:
;;   - the gradient that goes into v is taken as at least 2^-56, so g * g is at least 2^-112
;;     (as Adafactor adds 1e-30 to it) and c2 * g * g, and with it v, at least 2^-126 (for c2
;;     from 2^-14, beta2 up to 0.99994); the squares of gradients under 2^-63 are subnormal, and a
;;     learner's gradients get there as it trains (a unit that no longer fires, an example it has
;;     learnt), and v would then decay by b2 into the subnormal range;
;;   - m is stored as zero below 2^-100, so neither b1 * m nor step * m is subnormal while m
;;     decays, as it does by b1 each step where the gradient stays near zero.
;; With the moments alone held to 2^-126 (stored as zero below it), the example MLP's learner
;; slowed from 116,000 to 97,000 samples/s over 140,000 steps, this kernel's share of a step going
;; from 10 to 16 %; with these floors its share stayed at 10-11 %, and the kernel takes as many
;; operations as before. A subnormal gradient is still taken as it is into m (c1 * g): gradients
;; do not come that close to zero without passing through zero. What the floors change of an
;; update is below the rounding of any parameter farther than about 1e-18 from zero: m under
;; 2^-100 moves one by less than step * 2^-100 / epsHat (about 1e-25 with the default learning
;; rate and epsilon), and a v of 2^-112 has a root of 2^-56, which the default epsHat (from 3e-9)
;; rounds away. NaN is kept: the floor is taken where the gradient compares below it
;; (`f32x4.pmax`, one instruction on x86), which NaN does not.
(module
  (import "env" "memory" (memory 1 65536 shared))

  (func (export "adam")
    (param $out i32) (param $param i32) (param $grad i32) (param $m i32) (param $v i32) (param $n i32)
    (param $step f32) (param $b1 f32) (param $b2 f32) (param $c1 f32) (param $c2 f32)
    (param $epsHat f32) (param $l2 f32) (param $decay f32)
    (local $i i32) (local $end i32) (local $vectorEnd i32)
    (local $stepv v128) (local $b1v v128) (local $b2v v128) (local $c1v v128) (local $c2v v128)
    (local $epsv v128) (local $l2v v128) (local $decayv v128)
    (local $p v128) (local $g v128) (local $mi v128) (local $vi v128)
    (local $ps f32) (local $gs f32) (local $ms f32) (local $vs f32)
    (local $mFloor v128) (local $gFloor v128)
    (local.set $mFloor (f32x4.splat (f32.const 0x1p-100)))
    (local.set $gFloor (f32x4.splat (f32.const 0x1p-56)))
    (local.set $stepv (f32x4.splat (local.get $step)))
    (local.set $b1v (f32x4.splat (local.get $b1)))
    (local.set $b2v (f32x4.splat (local.get $b2)))
    (local.set $c1v (f32x4.splat (local.get $c1)))
    (local.set $c2v (f32x4.splat (local.get $c2)))
    (local.set $epsv (f32x4.splat (local.get $epsHat)))
    (local.set $l2v (f32x4.splat (local.get $l2)))
    (local.set $decayv (f32x4.splat (local.get $decay)))
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (local.set $vectorEnd (i32.and (local.get $end) (i32.const -16)))
    ;; Plain Adam (neither decay) has a vector loop of its own.
    (if (i32.and (f32.eq (local.get $l2) (f32.const 0)) (f32.eq (local.get $decay) (f32.const 0)))
      (then
        (block $plainDone
          (loop $plain
            (br_if $plainDone (i32.ge_u (local.get $i) (local.get $vectorEnd)))
            (local.set $p (v128.load (i32.add (local.get $param) (local.get $i))))
            (local.set $g (v128.load (i32.add (local.get $grad) (local.get $i))))
            (local.set $mi
              (f32x4.add
                (f32x4.mul (local.get $b1v) (v128.load (i32.add (local.get $m) (local.get $i))))
                (f32x4.mul (local.get $c1v) (local.get $g))))
            (local.set $g (f32x4.pmax (f32x4.abs (local.get $g)) (local.get $gFloor)))
            (local.set $vi
              (f32x4.add
                (f32x4.mul (local.get $b2v) (v128.load (i32.add (local.get $v) (local.get $i))))
                (f32x4.mul (f32x4.mul (local.get $c2v) (local.get $g)) (local.get $g))))
            (local.set $mi
              (v128.andnot (local.get $mi) (f32x4.lt (f32x4.abs (local.get $mi)) (local.get $mFloor))))
            (v128.store (i32.add (local.get $m) (local.get $i)) (local.get $mi))
            (v128.store (i32.add (local.get $v) (local.get $i)) (local.get $vi))
            (v128.store (i32.add (local.get $out) (local.get $i))
              (f32x4.sub
                (local.get $p)
                (f32x4.div
                  (f32x4.mul (local.get $stepv) (local.get $mi))
                  (f32x4.add (f32x4.sqrt (local.get $vi)) (local.get $epsv)))))
            (local.set $i (i32.add (local.get $i) (i32.const 16)))
            (br $plain))))
      (else
        (block $vectorsDone
          (loop $vectors
            (br_if $vectorsDone (i32.ge_u (local.get $i) (local.get $vectorEnd)))
            (local.set $p (v128.load (i32.add (local.get $param) (local.get $i))))
            (local.set $g
              (f32x4.add
                (v128.load (i32.add (local.get $grad) (local.get $i)))
                (f32x4.mul (local.get $l2v) (local.get $p))))
            (local.set $mi
              (f32x4.add
                (f32x4.mul (local.get $b1v) (v128.load (i32.add (local.get $m) (local.get $i))))
                (f32x4.mul (local.get $c1v) (local.get $g))))
            (local.set $g (f32x4.pmax (f32x4.abs (local.get $g)) (local.get $gFloor)))
            (local.set $vi
              (f32x4.add
                (f32x4.mul (local.get $b2v) (v128.load (i32.add (local.get $v) (local.get $i))))
                (f32x4.mul (f32x4.mul (local.get $c2v) (local.get $g)) (local.get $g))))
            (local.set $mi
              (v128.andnot (local.get $mi) (f32x4.lt (f32x4.abs (local.get $mi)) (local.get $mFloor))))
            (v128.store (i32.add (local.get $m) (local.get $i)) (local.get $mi))
            (v128.store (i32.add (local.get $v) (local.get $i)) (local.get $vi))
            (v128.store (i32.add (local.get $out) (local.get $i))
              (f32x4.sub
                (f32x4.sub (local.get $p) (f32x4.mul (local.get $p) (local.get $decayv)))
                (f32x4.div
                  (f32x4.mul (local.get $stepv) (local.get $mi))
                  (f32x4.add (f32x4.sqrt (local.get $vi)) (local.get $epsv)))))
            (local.set $i (i32.add (local.get $i) (i32.const 16)))
            (br $vectors)))))
    (block $tailDone
      (loop $tail
        (br_if $tailDone (i32.ge_u (local.get $i) (local.get $end)))
        (local.set $ps (f32.load (i32.add (local.get $param) (local.get $i))))
        (local.set $gs (f32.load (i32.add (local.get $grad) (local.get $i))))
        (local.set $gs
          (select
            (local.get $gs)
            (f32.add (local.get $gs) (f32.mul (local.get $l2) (local.get $ps)))
            (f32.eq (local.get $l2) (f32.const 0))))
        (local.set $ms
          (f32.add
            (f32.mul (local.get $b1) (f32.load (i32.add (local.get $m) (local.get $i))))
            (f32.mul (local.get $c1) (local.get $gs))))
        (local.set $gs (f32.abs (local.get $gs)))
        (local.set $gs (select (f32.const 0x1p-56) (local.get $gs) (f32.lt (local.get $gs) (f32.const 0x1p-56))))
        (local.set $vs
          (f32.add
            (f32.mul (local.get $b2) (f32.load (i32.add (local.get $v) (local.get $i))))
            (f32.mul (f32.mul (local.get $c2) (local.get $gs)) (local.get $gs))))
        (local.set $ms
          (select (f32.const 0) (local.get $ms) (f32.lt (f32.abs (local.get $ms)) (f32.const 0x1p-100))))
        (f32.store (i32.add (local.get $m) (local.get $i)) (local.get $ms))
        (f32.store (i32.add (local.get $v) (local.get $i)) (local.get $vs))
        (f32.store (i32.add (local.get $out) (local.get $i))
          (f32.sub
            (select
              (local.get $ps)
              (f32.sub (local.get $ps) (f32.mul (local.get $ps) (local.get $decay)))
              (f32.eq (local.get $decay) (f32.const 0)))
            (f32.div
              (f32.mul (local.get $step) (local.get $ms))
              (f32.add (f32.sqrt (local.get $vs)) (local.get $epsHat)))))
        (local.set $i (i32.add (local.get $i) (i32.const 4)))
        (br $tail))))
)
