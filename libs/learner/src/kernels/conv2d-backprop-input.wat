;; Gradient of conv2d (NHWC) with respect to its input, computed in place on the memory of
;; TensorFlow.js's wasm backend:
;;
;;   dx[b, xR, xC, d1] = sum over taps (wR, wC) and d2 of dy[b, yR, yC, d2] * W[wR, wC, d1, d2]
;;   for the taps where yR = (xR + top - wR) / strideH and yC = (xC + left - wC) / strideW are
;;   whole and inside dy.
;;
;; Every input position gathers its own sum, so dx is written once with no zeroing. The filter is
;; first transposed to [fH, fW, outC, inC] in scratch memory, which puts the input channels of one
;; (tap, d2) side by side: the sum then broadcasts dy[d2] and multiplies it into 16, 8 or 4 input
;; channels at a time, its accumulators in registers.
(module
  (import "env" "memory" (memory 0))

  ;; W [taps, inC, outC] to Wt [taps, outC, inC].
  (func $transpose (param $w i32) (param $wt i32) (param $taps i32) (param $inC i32) (param $outC i32)
    (local $t i32) (local $d1 i32) (local $d2 i32) (local $src i32) (local $tapBytes i32)
    (local.set $tapBytes (i32.shl (i32.mul (local.get $inC) (local.get $outC)) (i32.const 2)))
    (local.set $t (i32.const 0))
    (loop $tapsL
      (local.set $d1 (i32.const 0))
      (loop $ins
        (local.set $d2 (i32.const 0))
        (local.set $src
          (i32.add (local.get $w)
            (i32.add (i32.mul (local.get $t) (local.get $tapBytes))
              (i32.shl (i32.mul (local.get $d1) (local.get $outC)) (i32.const 2)))))
        (loop $outs
          (f32.store
            (i32.add (local.get $wt)
              (i32.add (i32.mul (local.get $t) (local.get $tapBytes))
                (i32.shl (i32.add (i32.mul (local.get $d2) (local.get $inC)) (local.get $d1)) (i32.const 2))))
            (f32.load (i32.add (local.get $src) (i32.shl (local.get $d2) (i32.const 2)))))
          (br_if $outs (i32.lt_s (local.tee $d2 (i32.add (local.get $d2) (i32.const 1))) (local.get $outC))))
        (br_if $ins (i32.lt_s (local.tee $d1 (i32.add (local.get $d1) (i32.const 1))) (local.get $inC))))
      (br_if $tapsL (i32.lt_s (local.tee $t (i32.add (local.get $t) (i32.const 1))) (local.get $taps)))))

  ;; The output index that input index `i` reaches through tap `w` ((i + pad - w) / stride), or
  ;; -1 when that is not whole or lies outside [0, outSize).
  (func $source (param $i i32) (param $pad i32) (param $w i32) (param $stride i32) (param $outSize i32) (result i32)
    (local $n i32) (local $y i32)
    (local.set $n (i32.sub (i32.add (local.get $i) (local.get $pad)) (local.get $w)))
    (if (i32.lt_s (local.get $n) (i32.const 0)) (then (return (i32.const -1))))
    (local.set $y (i32.div_u (local.get $n) (local.get $stride)))
    (if (i32.ne (i32.mul (local.get $y) (local.get $stride)) (local.get $n)) (then (return (i32.const -1))))
    (if (i32.ge_s (local.get $y) (local.get $outSize)) (then (return (i32.const -1))))
    (local.get $y))

  ;; The sums below add, for one input position and one block of input channels, dy[d2] times the
  ;; transposed filter row of every tap that reaches it. `taps` holds, per reaching tap, the byte
  ;; address of its dy row and of its Wt row (at the first channel of the block); `count` taps.
  ;; Four d2 are taken per step: one load of dy, each lane broadcast in turn.

  (func $gather16 (param $taps i32) (param $count i32) (param $outC i32) (param $rowBytes i32) (param $op i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $g v128) (local $s v128)
    (local $t i32) (local $dp i32) (local $wp i32) (local $d2 i32)
    (local.set $t (local.get $taps))
    (loop $tapsL
      (local.set $dp (i32.load (local.get $t)))
      (local.set $wp (i32.load offset=4 (local.get $t)))
      (local.set $d2 (i32.const 0))
      (block $quadsDone
        (loop $quads
          (br_if $quadsDone (i32.gt_s (i32.add (local.get $d2) (i32.const 4)) (local.get $outC)))
          (local.set $g (v128.load (local.get $dp)))
          (local.set $s (i8x16.shuffle 0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3 (local.get $g) (local.get $g)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $wp)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $wp)))))
          (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $s) (v128.load offset=32 (local.get $wp)))))
          (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $s) (v128.load offset=48 (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $s (i8x16.shuffle 4 5 6 7 4 5 6 7 4 5 6 7 4 5 6 7 (local.get $g) (local.get $g)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $wp)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $wp)))))
          (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $s) (v128.load offset=32 (local.get $wp)))))
          (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $s) (v128.load offset=48 (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $s (i8x16.shuffle 8 9 10 11 8 9 10 11 8 9 10 11 8 9 10 11 (local.get $g) (local.get $g)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $wp)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $wp)))))
          (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $s) (v128.load offset=32 (local.get $wp)))))
          (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $s) (v128.load offset=48 (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $s (i8x16.shuffle 12 13 14 15 12 13 14 15 12 13 14 15 12 13 14 15 (local.get $g) (local.get $g)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $wp)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $wp)))))
          (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $s) (v128.load offset=32 (local.get $wp)))))
          (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $s) (v128.load offset=48 (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $dp (i32.add (local.get $dp) (i32.const 16)))
          (local.set $d2 (i32.add (local.get $d2) (i32.const 4)))
          (br $quads)))
      (block $singlesDone
        (loop $singles
          (br_if $singlesDone (i32.ge_s (local.get $d2) (local.get $outC)))
          (local.set $s (v128.load32_splat (local.get $dp)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $wp)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $wp)))))
          (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $s) (v128.load offset=32 (local.get $wp)))))
          (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $s) (v128.load offset=48 (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $dp (i32.add (local.get $dp) (i32.const 4)))
          (local.set $d2 (i32.add (local.get $d2) (i32.const 1)))
          (br $singles)))
      (br_if $tapsL
        (i32.lt_u
          (local.tee $t (i32.add (local.get $t) (i32.const 8)))
          (i32.add (local.get $taps) (i32.shl (local.get $count) (i32.const 3))))))
    (v128.store (local.get $op) (local.get $a0))
    (v128.store offset=16 (local.get $op) (local.get $a1))
    (v128.store offset=32 (local.get $op) (local.get $a2))
    (v128.store offset=48 (local.get $op) (local.get $a3)))

  (func $gather8 (param $taps i32) (param $count i32) (param $outC i32) (param $rowBytes i32) (param $op i32)
    (local $a0 v128) (local $a1 v128) (local $g v128) (local $s v128)
    (local $t i32) (local $dp i32) (local $wp i32) (local $d2 i32)
    (local.set $t (local.get $taps))
    (loop $tapsL
      (local.set $dp (i32.load (local.get $t)))
      (local.set $wp (i32.load offset=4 (local.get $t)))
      (local.set $d2 (i32.const 0))
      (block $quadsDone
        (loop $quads
          (br_if $quadsDone (i32.gt_s (i32.add (local.get $d2) (i32.const 4)) (local.get $outC)))
          (local.set $g (v128.load (local.get $dp)))
          (local.set $s (i8x16.shuffle 0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3 (local.get $g) (local.get $g)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $wp)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $s (i8x16.shuffle 4 5 6 7 4 5 6 7 4 5 6 7 4 5 6 7 (local.get $g) (local.get $g)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $wp)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $s (i8x16.shuffle 8 9 10 11 8 9 10 11 8 9 10 11 8 9 10 11 (local.get $g) (local.get $g)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $wp)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $s (i8x16.shuffle 12 13 14 15 12 13 14 15 12 13 14 15 12 13 14 15 (local.get $g) (local.get $g)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $wp)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $dp (i32.add (local.get $dp) (i32.const 16)))
          (local.set $d2 (i32.add (local.get $d2) (i32.const 4)))
          (br $quads)))
      (block $singlesDone
        (loop $singles
          (br_if $singlesDone (i32.ge_s (local.get $d2) (local.get $outC)))
          (local.set $s (v128.load32_splat (local.get $dp)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $wp)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $dp (i32.add (local.get $dp) (i32.const 4)))
          (local.set $d2 (i32.add (local.get $d2) (i32.const 1)))
          (br $singles)))
      (br_if $tapsL
        (i32.lt_u
          (local.tee $t (i32.add (local.get $t) (i32.const 8)))
          (i32.add (local.get $taps) (i32.shl (local.get $count) (i32.const 3))))))
    (v128.store (local.get $op) (local.get $a0))
    (v128.store offset=16 (local.get $op) (local.get $a1)))

  (func $gather4 (param $taps i32) (param $count i32) (param $outC i32) (param $rowBytes i32) (param $op i32)
    (local $a0 v128) (local $g v128)
    (local $t i32) (local $dp i32) (local $wp i32) (local $d2 i32)
    (local.set $t (local.get $taps))
    (loop $tapsL
      (local.set $dp (i32.load (local.get $t)))
      (local.set $wp (i32.load offset=4 (local.get $t)))
      (local.set $d2 (i32.const 0))
      (block $quadsDone
        (loop $quads
          (br_if $quadsDone (i32.gt_s (i32.add (local.get $d2) (i32.const 4)) (local.get $outC)))
          (local.set $g (v128.load (local.get $dp)))
          (local.set $a0 (f32x4.add (local.get $a0)
            (f32x4.mul (i8x16.shuffle 0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3 (local.get $g) (local.get $g)) (v128.load (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $a0 (f32x4.add (local.get $a0)
            (f32x4.mul (i8x16.shuffle 4 5 6 7 4 5 6 7 4 5 6 7 4 5 6 7 (local.get $g) (local.get $g)) (v128.load (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $a0 (f32x4.add (local.get $a0)
            (f32x4.mul (i8x16.shuffle 8 9 10 11 8 9 10 11 8 9 10 11 8 9 10 11 (local.get $g) (local.get $g)) (v128.load (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $a0 (f32x4.add (local.get $a0)
            (f32x4.mul (i8x16.shuffle 12 13 14 15 12 13 14 15 12 13 14 15 12 13 14 15 (local.get $g) (local.get $g)) (v128.load (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $dp (i32.add (local.get $dp) (i32.const 16)))
          (local.set $d2 (i32.add (local.get $d2) (i32.const 4)))
          (br $quads)))
      (block $singlesDone
        (loop $singles
          (br_if $singlesDone (i32.ge_s (local.get $d2) (local.get $outC)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (v128.load32_splat (local.get $dp)) (v128.load (local.get $wp)))))
          (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
          (local.set $dp (i32.add (local.get $dp) (i32.const 4)))
          (local.set $d2 (i32.add (local.get $d2) (i32.const 1)))
          (br $singles)))
      (br_if $tapsL
        (i32.lt_u
          (local.tee $t (i32.add (local.get $t) (i32.const 8)))
          (i32.add (local.get $taps) (i32.shl (local.get $count) (i32.const 3))))))
    (v128.store (local.get $op) (local.get $a0)))

  (func $gather1 (param $taps i32) (param $count i32) (param $outC i32) (param $rowBytes i32) (param $op i32)
    (local $a0 f32)
    (local $t i32) (local $dp i32) (local $wp i32) (local $d2 i32)
    (local.set $t (local.get $taps))
    (loop $tapsL
      (local.set $dp (i32.load (local.get $t)))
      (local.set $wp (i32.load offset=4 (local.get $t)))
      (local.set $d2 (i32.const 0))
      (loop $singles
        (local.set $a0 (f32.add (local.get $a0) (f32.mul (f32.load (local.get $dp)) (f32.load (local.get $wp)))))
        (local.set $wp (i32.add (local.get $wp) (local.get $rowBytes)))
        (local.set $dp (i32.add (local.get $dp) (i32.const 4)))
        (br_if $singles (i32.lt_s (local.tee $d2 (i32.add (local.get $d2) (i32.const 1))) (local.get $outC))))
      (br_if $tapsL
        (i32.lt_u
          (local.tee $t (i32.add (local.get $t) (i32.const 8)))
          (i32.add (local.get $taps) (i32.shl (local.get $count) (i32.const 3))))))
    (f32.store (local.get $op) (local.get $a0)))

  ;; dy [batch, outH, outW, outC], filter [fH, fW, inC, outC] and out [batch, inH, inW, inC] are
  ;; byte addresses of float32 tensors. `scratch` holds fH * fW * inC * outC floats for the
  ;; transposed filter and then 2 * fH * fW words for the list of reaching taps.
  (func (export "conv2d_backprop_input")
    (param $dy i32) (param $filter i32) (param $out i32) (param $scratch i32)
    (param $batch i32) (param $inH i32) (param $inW i32) (param $inC i32)
    (param $outH i32) (param $outW i32) (param $outC i32)
    (param $fH i32) (param $fW i32) (param $sH i32) (param $sW i32) (param $top i32) (param $left i32)
    (local $taps i32) (local $rowBytes i32) (local $tapBytes i32) (local $b i32) (local $xR i32) (local $xC i32)
    (local $wR i32) (local $wC i32) (local $yR i32) (local $yC i32) (local $count i32) (local $entry i32)
    (local $op i32) (local $d1 i32)
    (call $transpose (local.get $filter) (local.get $scratch)
      (i32.mul (local.get $fH) (local.get $fW)) (local.get $inC) (local.get $outC))
    (local.set $rowBytes (i32.shl (local.get $inC) (i32.const 2)))
    (local.set $tapBytes (i32.mul (local.get $rowBytes) (local.get $outC)))
    (local.set $taps
      (i32.add (local.get $scratch) (i32.mul (i32.mul (local.get $fH) (local.get $fW)) (local.get $tapBytes))))
    (local.set $op (local.get $out))
    (local.set $b (i32.const 0))
    (loop $images
      (local.set $xR (i32.const 0))
      (loop $rows
        (local.set $xC (i32.const 0))
        (loop $cols
          ;; The taps that reach this input position, each as (dy row, Wt row at channel 0).
          (local.set $count (i32.const 0))
          (local.set $entry (local.get $taps))
          (local.set $wR (i32.const 0))
          (loop $tapRows
            (local.set $yR (call $source (local.get $xR) (local.get $top) (local.get $wR) (local.get $sH) (local.get $outH)))
            (if (i32.ge_s (local.get $yR) (i32.const 0))
              (then
                (local.set $wC (i32.const 0))
                (loop $tapCols
                  (local.set $yC (call $source (local.get $xC) (local.get $left) (local.get $wC) (local.get $sW) (local.get $outW)))
                  (if (i32.ge_s (local.get $yC) (i32.const 0))
                    (then
                      (i32.store (local.get $entry)
                        (i32.add (local.get $dy)
                          (i32.shl
                            (i32.mul
                              (i32.add
                                (i32.mul (i32.add (i32.mul (local.get $b) (local.get $outH)) (local.get $yR)) (local.get $outW))
                                (local.get $yC))
                              (local.get $outC))
                            (i32.const 2))))
                      (i32.store offset=4 (local.get $entry)
                        (i32.add (local.get $scratch)
                          (i32.mul (i32.add (i32.mul (local.get $wR) (local.get $fW)) (local.get $wC)) (local.get $tapBytes))))
                      (local.set $entry (i32.add (local.get $entry) (i32.const 8)))
                      (local.set $count (i32.add (local.get $count) (i32.const 1)))))
                  (br_if $tapCols (i32.lt_s (local.tee $wC (i32.add (local.get $wC) (i32.const 1))) (local.get $fW))))))
            (br_if $tapRows (i32.lt_s (local.tee $wR (i32.add (local.get $wR) (i32.const 1))) (local.get $fH))))
          (if (i32.eqz (local.get $count))
            (then (memory.fill (local.get $op) (i32.const 0) (local.get $rowBytes)))
            (else
              (local.set $d1 (i32.const 0))
              (block $done16
                (loop $by16
                  (br_if $done16 (i32.gt_s (i32.add (local.get $d1) (i32.const 16)) (local.get $inC)))
                  (call $gather16 (local.get $taps) (local.get $count) (local.get $outC) (local.get $rowBytes)
                    (i32.add (local.get $op) (i32.shl (local.get $d1) (i32.const 2))))
                  (local.set $d1 (i32.add (local.get $d1) (i32.const 16)))
                  (call $advance (local.get $taps) (local.get $count) (i32.const 64))
                  (br $by16)))
              (if (i32.le_s (i32.add (local.get $d1) (i32.const 8)) (local.get $inC))
                (then
                  (call $gather8 (local.get $taps) (local.get $count) (local.get $outC) (local.get $rowBytes)
                    (i32.add (local.get $op) (i32.shl (local.get $d1) (i32.const 2))))
                  (local.set $d1 (i32.add (local.get $d1) (i32.const 8)))
                  (call $advance (local.get $taps) (local.get $count) (i32.const 32))))
              (if (i32.le_s (i32.add (local.get $d1) (i32.const 4)) (local.get $inC))
                (then
                  (call $gather4 (local.get $taps) (local.get $count) (local.get $outC) (local.get $rowBytes)
                    (i32.add (local.get $op) (i32.shl (local.get $d1) (i32.const 2))))
                  (local.set $d1 (i32.add (local.get $d1) (i32.const 4)))
                  (call $advance (local.get $taps) (local.get $count) (i32.const 16))))
              (block $done1
                (loop $by1
                  (br_if $done1 (i32.ge_s (local.get $d1) (local.get $inC)))
                  (call $gather1 (local.get $taps) (local.get $count) (local.get $outC) (local.get $rowBytes)
                    (i32.add (local.get $op) (i32.shl (local.get $d1) (i32.const 2))))
                  (local.set $d1 (i32.add (local.get $d1) (i32.const 1)))
                  (call $advance (local.get $taps) (local.get $count) (i32.const 4))
                  (br $by1)))))
          (local.set $op (i32.add (local.get $op) (local.get $rowBytes)))
          (br_if $cols (i32.lt_s (local.tee $xC (i32.add (local.get $xC) (i32.const 1))) (local.get $inW))))
        (br_if $rows (i32.lt_s (local.tee $xR (i32.add (local.get $xR) (i32.const 1))) (local.get $inH))))
      (br_if $images (i32.lt_s (local.tee $b (i32.add (local.get $b) (i32.const 1))) (local.get $batch)))))

  ;; Moves every listed Wt row on by `bytes`, to the next block of input channels.
  (func $advance (param $taps i32) (param $count i32) (param $bytes i32)
    (local $end i32)
    (local.set $end (i32.add (local.get $taps) (i32.shl (local.get $count) (i32.const 3))))
    (loop $each
      (i32.store offset=4 (local.get $taps) (i32.add (i32.load offset=4 (local.get $taps)) (local.get $bytes)))
      (br_if $each (i32.lt_u (local.tee $taps (i32.add (local.get $taps) (i32.const 8))) (local.get $end))))))
