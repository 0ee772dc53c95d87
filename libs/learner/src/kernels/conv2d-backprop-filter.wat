;; Gradient of conv2d (NHWC) with respect to its filter, computed in place on the memory of
;; TensorFlow.js's wasm backend (imported, so tensors are read and written where they lie):
;;
;;   dW[wR, wC, d1, d2] = sum over b, yR, yC of x[b, xR, xC, d1] * dy[b, yR, yC, d2]
;;   with xR = yR * strideH + wR * dilationH - top, xC = yC * strideW + wC * dilationW - left.
;;
;; For one filter tap the output positions whose input lies inside the image form a rectangle, so
;; each (tap, d1, block of d2) is one sum over that rectangle with no bounds tests and its
;; accumulators in registers, stored once. Sums are float32, in a fixed order.
(module
  (import "env" "memory" (memory 0))

  ;; First output index y whose input index y * stride + offset is not negative.
  (func $first (param $offset i32) (param $stride i32) (result i32)
    (if (result i32) (i32.ge_s (local.get $offset) (i32.const 0))
      (then (i32.const 0))
      (else
        (i32.div_s
          (i32.sub (local.get $stride) (i32.add (local.get $offset) (i32.const 1)))
          (local.get $stride)))))

  ;; One past the last output index y (below `outSize`) whose input index y * stride + offset
  ;; is below `inSize`.
  (func $end (param $offset i32) (param $stride i32) (param $inSize i32) (param $outSize i32) (result i32)
    (local $last i32)
    (local.set $last (i32.sub (i32.sub (local.get $inSize) (i32.const 1)) (local.get $offset)))
    (if (result i32) (i32.lt_s (local.get $last) (i32.const 0))
      (then (i32.const 0))
      (else
        (select
          (local.get $outSize)
          (i32.add (i32.div_s (local.get $last) (local.get $stride)) (i32.const 1))
          (i32.lt_s (local.get $outSize)
            (i32.add (i32.div_s (local.get $last) (local.get $stride)) (i32.const 1)))))))

  ;; The sums below share one walk: `batch` images of `rows` x `cols` positions; x advances by
  ;; xc bytes per column, xr per row and xb per image, dy likewise by dc, dr and db. Each
  ;; broadcasts x[d1] and multiplies it into 16, 8, 4 or 1 consecutive dy channels.

  (func $sum16
    (param $xp i32) (param $dp i32) (param $op i32)
    (param $batch i32) (param $rows i32) (param $cols i32)
    (param $xc i32) (param $xr i32) (param $xb i32)
    (param $dc i32) (param $dr i32) (param $db i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $v v128)
    (local $b i32) (local $r i32) (local $c i32)
    (local $xrow i32) (local $drow i32) (local $x i32) (local $d i32)
    (local.set $b (local.get $batch))
    (loop $images
      (local.set $xrow (local.get $xp))
      (local.set $drow (local.get $dp))
      (local.set $r (local.get $rows))
      (loop $lines
        (local.set $x (local.get $xrow))
        (local.set $d (local.get $drow))
        (local.set $c (local.get $cols))
        (loop $columns
          (local.set $v (v128.load32_splat (local.get $x)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $v) (v128.load (local.get $d)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $v) (v128.load offset=16 (local.get $d)))))
          (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $v) (v128.load offset=32 (local.get $d)))))
          (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $v) (v128.load offset=48 (local.get $d)))))
          (local.set $x (i32.add (local.get $x) (local.get $xc)))
          (local.set $d (i32.add (local.get $d) (local.get $dc)))
          (br_if $columns (local.tee $c (i32.sub (local.get $c) (i32.const 1)))))
        (local.set $xrow (i32.add (local.get $xrow) (local.get $xr)))
        (local.set $drow (i32.add (local.get $drow) (local.get $dr)))
        (br_if $lines (local.tee $r (i32.sub (local.get $r) (i32.const 1)))))
      (local.set $xp (i32.add (local.get $xp) (local.get $xb)))
      (local.set $dp (i32.add (local.get $dp) (local.get $db)))
      (br_if $images (local.tee $b (i32.sub (local.get $b) (i32.const 1)))))
    (v128.store (local.get $op) (local.get $a0))
    (v128.store offset=16 (local.get $op) (local.get $a1))
    (v128.store offset=32 (local.get $op) (local.get $a2))
    (v128.store offset=48 (local.get $op) (local.get $a3)))

  (func $sum8
    (param $xp i32) (param $dp i32) (param $op i32)
    (param $batch i32) (param $rows i32) (param $cols i32)
    (param $xc i32) (param $xr i32) (param $xb i32)
    (param $dc i32) (param $dr i32) (param $db i32)
    (local $a0 v128) (local $a1 v128) (local $v v128)
    (local $b i32) (local $r i32) (local $c i32)
    (local $xrow i32) (local $drow i32) (local $x i32) (local $d i32)
    (local.set $b (local.get $batch))
    (loop $images
      (local.set $xrow (local.get $xp))
      (local.set $drow (local.get $dp))
      (local.set $r (local.get $rows))
      (loop $lines
        (local.set $x (local.get $xrow))
        (local.set $d (local.get $drow))
        (local.set $c (local.get $cols))
        (loop $columns
          (local.set $v (v128.load32_splat (local.get $x)))
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $v) (v128.load (local.get $d)))))
          (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $v) (v128.load offset=16 (local.get $d)))))
          (local.set $x (i32.add (local.get $x) (local.get $xc)))
          (local.set $d (i32.add (local.get $d) (local.get $dc)))
          (br_if $columns (local.tee $c (i32.sub (local.get $c) (i32.const 1)))))
        (local.set $xrow (i32.add (local.get $xrow) (local.get $xr)))
        (local.set $drow (i32.add (local.get $drow) (local.get $dr)))
        (br_if $lines (local.tee $r (i32.sub (local.get $r) (i32.const 1)))))
      (local.set $xp (i32.add (local.get $xp) (local.get $xb)))
      (local.set $dp (i32.add (local.get $dp) (local.get $db)))
      (br_if $images (local.tee $b (i32.sub (local.get $b) (i32.const 1)))))
    (v128.store (local.get $op) (local.get $a0))
    (v128.store offset=16 (local.get $op) (local.get $a1)))

  (func $sum4
    (param $xp i32) (param $dp i32) (param $op i32)
    (param $batch i32) (param $rows i32) (param $cols i32)
    (param $xc i32) (param $xr i32) (param $xb i32)
    (param $dc i32) (param $dr i32) (param $db i32)
    (local $a0 v128)
    (local $b i32) (local $r i32) (local $c i32)
    (local $xrow i32) (local $drow i32) (local $x i32) (local $d i32)
    (local.set $b (local.get $batch))
    (loop $images
      (local.set $xrow (local.get $xp))
      (local.set $drow (local.get $dp))
      (local.set $r (local.get $rows))
      (loop $lines
        (local.set $x (local.get $xrow))
        (local.set $d (local.get $drow))
        (local.set $c (local.get $cols))
        (loop $columns
          (local.set $a0
            (f32x4.add (local.get $a0) (f32x4.mul (v128.load32_splat (local.get $x)) (v128.load (local.get $d)))))
          (local.set $x (i32.add (local.get $x) (local.get $xc)))
          (local.set $d (i32.add (local.get $d) (local.get $dc)))
          (br_if $columns (local.tee $c (i32.sub (local.get $c) (i32.const 1)))))
        (local.set $xrow (i32.add (local.get $xrow) (local.get $xr)))
        (local.set $drow (i32.add (local.get $drow) (local.get $dr)))
        (br_if $lines (local.tee $r (i32.sub (local.get $r) (i32.const 1)))))
      (local.set $xp (i32.add (local.get $xp) (local.get $xb)))
      (local.set $dp (i32.add (local.get $dp) (local.get $db)))
      (br_if $images (local.tee $b (i32.sub (local.get $b) (i32.const 1)))))
    (v128.store (local.get $op) (local.get $a0)))

  (func $sum1
    (param $xp i32) (param $dp i32) (param $op i32)
    (param $batch i32) (param $rows i32) (param $cols i32)
    (param $xc i32) (param $xr i32) (param $xb i32)
    (param $dc i32) (param $dr i32) (param $db i32)
    (local $a0 f32)
    (local $b i32) (local $r i32) (local $c i32)
    (local $xrow i32) (local $drow i32) (local $x i32) (local $d i32)
    (local.set $b (local.get $batch))
    (loop $images
      (local.set $xrow (local.get $xp))
      (local.set $drow (local.get $dp))
      (local.set $r (local.get $rows))
      (loop $lines
        (local.set $x (local.get $xrow))
        (local.set $d (local.get $drow))
        (local.set $c (local.get $cols))
        (loop $columns
          (local.set $a0 (f32.add (local.get $a0) (f32.mul (f32.load (local.get $x)) (f32.load (local.get $d)))))
          (local.set $x (i32.add (local.get $x) (local.get $xc)))
          (local.set $d (i32.add (local.get $d) (local.get $dc)))
          (br_if $columns (local.tee $c (i32.sub (local.get $c) (i32.const 1)))))
        (local.set $xrow (i32.add (local.get $xrow) (local.get $xr)))
        (local.set $drow (i32.add (local.get $drow) (local.get $dr)))
        (br_if $lines (local.tee $r (i32.sub (local.get $r) (i32.const 1)))))
      (local.set $xp (i32.add (local.get $xp) (local.get $xb)))
      (local.set $dp (i32.add (local.get $dp) (local.get $db)))
      (br_if $images (local.tee $b (i32.sub (local.get $b) (i32.const 1)))))
    (f32.store (local.get $op) (local.get $a0)))

  ;; x [batch, inH, inW, inC], dy [batch, outH, outW, outC] and out [fH, fW, inC, outC] are byte
  ;; addresses of float32 tensors; batch is at least 1.
  (func (export "conv2d_backprop_filter")
    (param $x i32) (param $dy i32) (param $out i32)
    (param $batch i32) (param $inH i32) (param $inW i32) (param $inC i32)
    (param $outH i32) (param $outW i32) (param $outC i32)
    (param $fH i32) (param $fW i32) (param $sH i32) (param $sW i32)
    (param $dilH i32) (param $dilW i32) (param $top i32) (param $left i32)
    (local $xc i32) (local $xr i32) (local $xb i32) (local $dc i32) (local $dr i32) (local $db i32)
    (local $wR i32) (local $wC i32) (local $offR i32) (local $offC i32)
    (local $r0 i32) (local $r1 i32) (local $c0 i32) (local $c1 i32)
    (local $tapX i32) (local $tapDy i32) (local $tapOut i32)
    (local $d1 i32) (local $d2 i32) (local $xp i32) (local $op i32)
    ;; Taps that never touch the image keep a zero gradient.
    (memory.fill (local.get $out) (i32.const 0)
      (i32.shl
        (i32.mul (i32.mul (local.get $fH) (local.get $fW)) (i32.mul (local.get $inC) (local.get $outC)))
        (i32.const 2)))
    (local.set $xc (i32.shl (i32.mul (local.get $sW) (local.get $inC)) (i32.const 2)))
    (local.set $xr (i32.shl (i32.mul (local.get $sH) (i32.mul (local.get $inW) (local.get $inC))) (i32.const 2)))
    (local.set $xb (i32.shl (i32.mul (local.get $inH) (i32.mul (local.get $inW) (local.get $inC))) (i32.const 2)))
    (local.set $dc (i32.shl (local.get $outC) (i32.const 2)))
    (local.set $dr (i32.mul (local.get $outW) (local.get $dc)))
    (local.set $db (i32.mul (local.get $outH) (local.get $dr)))
    (local.set $wR (i32.const 0))
    (loop $tapRows
      (local.set $offR (i32.sub (i32.mul (local.get $wR) (local.get $dilH)) (local.get $top)))
      (local.set $r0 (call $first (local.get $offR) (local.get $sH)))
      (local.set $r1 (call $end (local.get $offR) (local.get $sH) (local.get $inH) (local.get $outH)))
      (if (i32.lt_s (local.get $r0) (local.get $r1))
        (then
          (local.set $wC (i32.const 0))
          (loop $tapCols
            (local.set $offC (i32.sub (i32.mul (local.get $wC) (local.get $dilW)) (local.get $left)))
            (local.set $c0 (call $first (local.get $offC) (local.get $sW)))
            (local.set $c1 (call $end (local.get $offC) (local.get $sW) (local.get $inW) (local.get $outW)))
            (if (i32.lt_s (local.get $c0) (local.get $c1))
              (then
                (local.set $tapX
                  (i32.add (local.get $x)
                    (i32.shl
                      (i32.mul
                        (i32.add
                          (i32.mul
                            (i32.add (i32.mul (local.get $r0) (local.get $sH)) (local.get $offR))
                            (local.get $inW))
                          (i32.add (i32.mul (local.get $c0) (local.get $sW)) (local.get $offC)))
                        (local.get $inC))
                      (i32.const 2))))
                (local.set $tapDy
                  (i32.add (local.get $dy)
                    (i32.mul
                      (i32.add (i32.mul (local.get $r0) (local.get $outW)) (local.get $c0))
                      (local.get $dc))))
                (local.set $tapOut
                  (i32.add (local.get $out)
                    (i32.mul
                      (i32.mul
                        (i32.add (i32.mul (local.get $wR) (local.get $fW)) (local.get $wC))
                        (local.get $inC))
                      (local.get $dc))))
                (local.set $d1 (i32.const 0))
                (loop $inChannels
                  (local.set $xp (i32.add (local.get $tapX) (i32.shl (local.get $d1) (i32.const 2))))
                  (local.set $op (i32.add (local.get $tapOut) (i32.mul (local.get $d1) (local.get $dc))))
                  (local.set $d2 (i32.const 0))
                  (block $done16
                    (loop $by16
                      (br_if $done16 (i32.gt_s (i32.add (local.get $d2) (i32.const 16)) (local.get $outC)))
                      (call $sum16
                        (local.get $xp)
                        (i32.add (local.get $tapDy) (i32.shl (local.get $d2) (i32.const 2)))
                        (i32.add (local.get $op) (i32.shl (local.get $d2) (i32.const 2)))
                        (local.get $batch) (i32.sub (local.get $r1) (local.get $r0)) (i32.sub (local.get $c1) (local.get $c0))
                        (local.get $xc) (local.get $xr) (local.get $xb)
                        (local.get $dc) (local.get $dr) (local.get $db))
                      (local.set $d2 (i32.add (local.get $d2) (i32.const 16)))
                      (br $by16)))
                  (if (i32.le_s (i32.add (local.get $d2) (i32.const 8)) (local.get $outC))
                    (then
                      (call $sum8
                        (local.get $xp)
                        (i32.add (local.get $tapDy) (i32.shl (local.get $d2) (i32.const 2)))
                        (i32.add (local.get $op) (i32.shl (local.get $d2) (i32.const 2)))
                        (local.get $batch) (i32.sub (local.get $r1) (local.get $r0)) (i32.sub (local.get $c1) (local.get $c0))
                        (local.get $xc) (local.get $xr) (local.get $xb)
                        (local.get $dc) (local.get $dr) (local.get $db))
                      (local.set $d2 (i32.add (local.get $d2) (i32.const 8)))))
                  (if (i32.le_s (i32.add (local.get $d2) (i32.const 4)) (local.get $outC))
                    (then
                      (call $sum4
                        (local.get $xp)
                        (i32.add (local.get $tapDy) (i32.shl (local.get $d2) (i32.const 2)))
                        (i32.add (local.get $op) (i32.shl (local.get $d2) (i32.const 2)))
                        (local.get $batch) (i32.sub (local.get $r1) (local.get $r0)) (i32.sub (local.get $c1) (local.get $c0))
                        (local.get $xc) (local.get $xr) (local.get $xb)
                        (local.get $dc) (local.get $dr) (local.get $db))
                      (local.set $d2 (i32.add (local.get $d2) (i32.const 4)))))
                  (block $done1
                    (loop $by1
                      (br_if $done1 (i32.ge_s (local.get $d2) (local.get $outC)))
                      (call $sum1
                        (local.get $xp)
                        (i32.add (local.get $tapDy) (i32.shl (local.get $d2) (i32.const 2)))
                        (i32.add (local.get $op) (i32.shl (local.get $d2) (i32.const 2)))
                        (local.get $batch) (i32.sub (local.get $r1) (local.get $r0)) (i32.sub (local.get $c1) (local.get $c0))
                        (local.get $xc) (local.get $xr) (local.get $xb)
                        (local.get $dc) (local.get $dr) (local.get $db))
                      (local.set $d2 (i32.add (local.get $d2) (i32.const 1)))
                      (br $by1)))
                  (br_if $inChannels (i32.lt_s (local.tee $d1 (i32.add (local.get $d1) (i32.const 1))) (local.get $inC))))))
            (br_if $tapCols (i32.lt_s (local.tee $wC (i32.add (local.get $wC) (i32.const 1))) (local.get $fW))))))
      (br_if $tapRows (i32.lt_s (local.tee $wR (i32.add (local.get $wR) (i32.const 1))) (local.get $fH))))))
