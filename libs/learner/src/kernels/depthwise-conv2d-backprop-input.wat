;; Gradient of a depthwise conv2d (NHWC) with respect to its input, computed in place on the
;; memory of TensorFlow.js's wasm backend. With m = outC / inC and q = d1 * m + dm:
;;
;;   dx[b, xR, xC, d1] = sum over taps (wR, wC) and dm of dy[b, yR, yC, q] * W[wR, wC, d1, dm]
;;   for the taps where yR = (xR + top - wR * dilationH) / strideH and likewise yC are whole and
;;   inside dy.
;;
;; Every input position gathers its own sum, so dx is written once with no zeroing. One tap's
;; filter row is laid out like one dy position, by q: with m = 1 (the usual case) the sum
;; multiplies the two lane by lane, 16 or 4 channels at a time with the accumulators in
;; registers; otherwise each d1 sums its m products one by one.
(module
  (import "env" "memory" (memory 0))

  ;; The output index that input index `i` reaches through a tap at offset `w`
  ;; ((i + pad - w) / stride), or -1 when that is not whole or lies outside [0, outSize).
  (func $source (param $i i32) (param $pad i32) (param $w i32) (param $stride i32) (param $outSize i32) (result i32)
    (local $n i32) (local $y i32)
    (local.set $n (i32.sub (i32.add (local.get $i) (local.get $pad)) (local.get $w)))
    (if (i32.lt_s (local.get $n) (i32.const 0)) (then (return (i32.const -1))))
    (local.set $y (i32.div_u (local.get $n) (local.get $stride)))
    (if (i32.ne (i32.mul (local.get $y) (local.get $stride)) (local.get $n)) (then (return (i32.const -1))))
    (if (i32.ge_s (local.get $y) (local.get $outSize)) (then (return (i32.const -1))))
    (local.get $y))

  ;; The sums below add, for one input position and one block of channels, dy times the filter
  ;; over every tap that reaches it. `taps` holds, per reaching tap, the byte address of its dy
  ;; row and of its filter row; `count` taps; `at` is the block's byte offset in both rows.

  (func $lanes16 (param $taps i32) (param $count i32) (param $at i32) (param $op i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local $t i32) (local $end i32) (local $dp i32) (local $wp i32)
    (local.set $t (local.get $taps))
    (local.set $end (i32.add (local.get $taps) (i32.shl (local.get $count) (i32.const 3))))
    (loop $tapsL
      (local.set $dp (i32.add (i32.load (local.get $t)) (local.get $at)))
      (local.set $wp (i32.add (i32.load offset=4 (local.get $t)) (local.get $at)))
      (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (v128.load (local.get $dp)) (v128.load (local.get $wp)))))
      (local.set $a1
        (f32x4.add (local.get $a1) (f32x4.mul (v128.load offset=16 (local.get $dp)) (v128.load offset=16 (local.get $wp)))))
      (local.set $a2
        (f32x4.add (local.get $a2) (f32x4.mul (v128.load offset=32 (local.get $dp)) (v128.load offset=32 (local.get $wp)))))
      (local.set $a3
        (f32x4.add (local.get $a3) (f32x4.mul (v128.load offset=48 (local.get $dp)) (v128.load offset=48 (local.get $wp)))))
      (br_if $tapsL (i32.lt_u (local.tee $t (i32.add (local.get $t) (i32.const 8))) (local.get $end))))
    (v128.store (local.get $op) (local.get $a0))
    (v128.store offset=16 (local.get $op) (local.get $a1))
    (v128.store offset=32 (local.get $op) (local.get $a2))
    (v128.store offset=48 (local.get $op) (local.get $a3)))

  (func $lanes4 (param $taps i32) (param $count i32) (param $at i32) (param $op i32)
    (local $a0 v128) (local $t i32) (local $end i32)
    (local.set $t (local.get $taps))
    (local.set $end (i32.add (local.get $taps) (i32.shl (local.get $count) (i32.const 3))))
    (loop $tapsL
      (local.set $a0
        (f32x4.add (local.get $a0)
          (f32x4.mul
            (v128.load (i32.add (i32.load (local.get $t)) (local.get $at)))
            (v128.load (i32.add (i32.load offset=4 (local.get $t)) (local.get $at))))))
      (br_if $tapsL (i32.lt_u (local.tee $t (i32.add (local.get $t) (i32.const 8))) (local.get $end))))
    (v128.store (local.get $op) (local.get $a0)))

  ;; One d1: its `m` channels from byte offset `at` of both rows.
  (func $group (param $taps i32) (param $count i32) (param $at i32) (param $m i32) (param $op i32)
    (local $a0 f32) (local $t i32) (local $end i32) (local $dp i32) (local $wp i32) (local $dm i32)
    (local.set $t (local.get $taps))
    (local.set $end (i32.add (local.get $taps) (i32.shl (local.get $count) (i32.const 3))))
    (loop $tapsL
      (local.set $dp (i32.add (i32.load (local.get $t)) (local.get $at)))
      (local.set $wp (i32.add (i32.load offset=4 (local.get $t)) (local.get $at)))
      (local.set $dm (local.get $m))
      (loop $channels
        (local.set $a0 (f32.add (local.get $a0) (f32.mul (f32.load (local.get $dp)) (f32.load (local.get $wp)))))
        (local.set $dp (i32.add (local.get $dp) (i32.const 4)))
        (local.set $wp (i32.add (local.get $wp) (i32.const 4)))
        (br_if $channels (local.tee $dm (i32.sub (local.get $dm) (i32.const 1)))))
      (br_if $tapsL (i32.lt_u (local.tee $t (i32.add (local.get $t) (i32.const 8))) (local.get $end))))
    (f32.store (local.get $op) (local.get $a0)))

  ;; dy [batch, outH, outW, outC], filter [fH, fW, inC, outC / inC] and out [batch, inH, inW, inC]
  ;; are byte addresses of float32 tensors; outC is a multiple of inC. `scratch` holds
  ;; 2 * fH * fW words for the list of reaching taps.
  (func (export "depthwise_conv2d_backprop_input")
    (param $dy i32) (param $filter i32) (param $out i32) (param $scratch i32)
    (param $batch i32) (param $inH i32) (param $inW i32) (param $inC i32)
    (param $outH i32) (param $outW i32) (param $outC i32)
    (param $fH i32) (param $fW i32) (param $sH i32) (param $sW i32)
    (param $dilH i32) (param $dilW i32) (param $top i32) (param $left i32)
    (local $m i32) (local $rowBytes i32) (local $b i32) (local $xR i32) (local $xC i32)
    (local $wR i32) (local $wC i32) (local $yR i32) (local $yC i32) (local $count i32) (local $entry i32)
    (local $op i32) (local $d i32)
    (local.set $m (i32.div_u (local.get $outC) (local.get $inC)))
    (local.set $rowBytes (i32.shl (local.get $outC) (i32.const 2)))
    (local.set $op (local.get $out))
    (local.set $b (i32.const 0))
    (loop $images
      (local.set $xR (i32.const 0))
      (loop $rows
        (local.set $xC (i32.const 0))
        (loop $cols
          (local.set $count (i32.const 0))
          (local.set $entry (local.get $scratch))
          (local.set $wR (i32.const 0))
          (loop $tapRows
            (local.set $yR
              (call $source (local.get $xR) (local.get $top) (i32.mul (local.get $wR) (local.get $dilH))
                (local.get $sH) (local.get $outH)))
            (if (i32.ge_s (local.get $yR) (i32.const 0))
              (then
                (local.set $wC (i32.const 0))
                (loop $tapCols
                  (local.set $yC
                    (call $source (local.get $xC) (local.get $left) (i32.mul (local.get $wC) (local.get $dilW))
                      (local.get $sW) (local.get $outW)))
                  (if (i32.ge_s (local.get $yC) (i32.const 0))
                    (then
                      (i32.store (local.get $entry)
                        (i32.add (local.get $dy)
                          (i32.mul
                            (i32.add
                              (i32.mul (i32.add (i32.mul (local.get $b) (local.get $outH)) (local.get $yR)) (local.get $outW))
                              (local.get $yC))
                            (local.get $rowBytes))))
                      (i32.store offset=4 (local.get $entry)
                        (i32.add (local.get $filter)
                          (i32.mul (i32.add (i32.mul (local.get $wR) (local.get $fW)) (local.get $wC)) (local.get $rowBytes))))
                      (local.set $entry (i32.add (local.get $entry) (i32.const 8)))
                      (local.set $count (i32.add (local.get $count) (i32.const 1)))))
                  (br_if $tapCols (i32.lt_s (local.tee $wC (i32.add (local.get $wC) (i32.const 1))) (local.get $fW))))))
            (br_if $tapRows (i32.lt_s (local.tee $wR (i32.add (local.get $wR) (i32.const 1))) (local.get $fH))))
          (if (i32.eqz (local.get $count))
            (then (memory.fill (local.get $op) (i32.const 0) (i32.shl (local.get $inC) (i32.const 2))))
            (else
              (local.set $d (i32.const 0))
              (if (i32.eq (local.get $m) (i32.const 1))
                (then
                  (block $done16
                    (loop $by16
                      (br_if $done16 (i32.gt_s (i32.add (local.get $d) (i32.const 16)) (local.get $inC)))
                      (call $lanes16 (local.get $scratch) (local.get $count) (i32.shl (local.get $d) (i32.const 2))
                        (i32.add (local.get $op) (i32.shl (local.get $d) (i32.const 2))))
                      (local.set $d (i32.add (local.get $d) (i32.const 16)))
                      (br $by16)))
                  (block $done4
                    (loop $by4
                      (br_if $done4 (i32.gt_s (i32.add (local.get $d) (i32.const 4)) (local.get $inC)))
                      (call $lanes4 (local.get $scratch) (local.get $count) (i32.shl (local.get $d) (i32.const 2))
                        (i32.add (local.get $op) (i32.shl (local.get $d) (i32.const 2))))
                      (local.set $d (i32.add (local.get $d) (i32.const 4)))
                      (br $by4)))))
              ;; What is left: the channels after the last group of four when m = 1, else all.
              (block $done1
                (loop $by1
                  (br_if $done1 (i32.ge_s (local.get $d) (local.get $inC)))
                  (call $group (local.get $scratch) (local.get $count)
                    (i32.shl (i32.mul (local.get $d) (local.get $m)) (i32.const 2)) (local.get $m)
                    (i32.add (local.get $op) (i32.shl (local.get $d) (i32.const 2))))
                  (local.set $d (i32.add (local.get $d) (i32.const 1)))
                  (br $by1)))))
          (local.set $op (i32.add (local.get $op) (i32.shl (local.get $inC) (i32.const 2))))
          (br_if $cols (i32.lt_s (local.tee $xC (i32.add (local.get $xC) (i32.const 1))) (local.get $inW))))
        (br_if $rows (i32.lt_s (local.tee $xR (i32.add (local.get $xR) (i32.const 1))) (local.get $inH))))
      (br_if $images (i32.lt_s (local.tee $b (i32.add (local.get $b) (i32.const 1))) (local.get $batch))))))
