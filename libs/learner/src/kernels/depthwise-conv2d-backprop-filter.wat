;; Gradient of a depthwise conv2d (NHWC) with respect to its filter, computed in place on the
;; memory of TensorFlow.js's wasm backend. With m = outC / inC channels out per channel in and
;; q = d1 * m + dm:
;;
;;   dW[wR, wC, d1, dm] = sum over b, yR, yC of x[b, xR, xC, d1] * dy[b, yR, yC, q]
;;   with xR = yR * strideH + wR * dilationH - top, xC = yC * strideW + wC * dilationW - left.
;;
;; The filter row of one tap is laid out like one dy position, by q. As for conv2d, the output
;; positions whose input lies inside the image form one rectangle per tap, summed with no bounds
;; tests and the accumulators in registers. With m = 1 (the usual case) x and dy are multiplied
;; lane by lane; otherwise x[d1] is broadcast over its m channels of dy.
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

  ;; The sums below walk `batch` images of `rows` x `cols` positions; x advances by xc bytes per
  ;; column, xr per row and xb per image, dy likewise by dc, dr and db.

  ;; 16 channels, x and dy lane by lane (m = 1).
  (func $lanes16
    (param $xp i32) (param $dp i32) (param $op i32)
    (param $batch i32) (param $rows i32) (param $cols i32)
    (param $xc i32) (param $xr i32) (param $xb i32)
    (param $dc i32) (param $dr i32) (param $db i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
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
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (v128.load (local.get $x)) (v128.load (local.get $d)))))
          (local.set $a1
            (f32x4.add (local.get $a1) (f32x4.mul (v128.load offset=16 (local.get $x)) (v128.load offset=16 (local.get $d)))))
          (local.set $a2
            (f32x4.add (local.get $a2) (f32x4.mul (v128.load offset=32 (local.get $x)) (v128.load offset=32 (local.get $d)))))
          (local.set $a3
            (f32x4.add (local.get $a3) (f32x4.mul (v128.load offset=48 (local.get $x)) (v128.load offset=48 (local.get $d)))))
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

  ;; 4 channels, x and dy lane by lane (m = 1).
  (func $lanes4
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
          (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (v128.load (local.get $x)) (v128.load (local.get $d)))))
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

  ;; 4 of the m channels of one d1: x[d1] broadcast.
  (func $broadcast4
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

  ;; One channel.
  (func $single
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

  ;; x [batch, inH, inW, inC], dy [batch, outH, outW, outC] and out [fH, fW, inC, outC / inC] are
  ;; byte addresses of float32 tensors; batch is at least 1 and outC a multiple of inC.
  (func (export "depthwise_conv2d_backprop_filter")
    (param $x i32) (param $dy i32) (param $out i32)
    (param $batch i32) (param $inH i32) (param $inW i32) (param $inC i32)
    (param $outH i32) (param $outW i32) (param $outC i32)
    (param $fH i32) (param $fW i32) (param $sH i32) (param $sW i32)
    (param $dilH i32) (param $dilW i32) (param $top i32) (param $left i32)
    (local $m i32) (local $xc i32) (local $xr i32) (local $xb i32) (local $dc i32) (local $dr i32) (local $db i32)
    (local $wR i32) (local $wC i32) (local $offR i32) (local $offC i32)
    (local $r0 i32) (local $r1 i32) (local $c0 i32) (local $c1 i32) (local $rows i32) (local $cols i32)
    (local $tapX i32) (local $tapDy i32) (local $tapOut i32)
    (local $q i32) (local $d1 i32) (local $dm i32) (local $xp i32) (local $dp i32) (local $op i32)
    (local.set $m (i32.div_u (local.get $outC) (local.get $inC)))
    (memory.fill (local.get $out) (i32.const 0)
      (i32.shl (i32.mul (i32.mul (local.get $fH) (local.get $fW)) (local.get $outC)) (i32.const 2)))
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
          (local.set $rows (i32.sub (local.get $r1) (local.get $r0)))
          (local.set $wC (i32.const 0))
          (loop $tapCols
            (local.set $offC (i32.sub (i32.mul (local.get $wC) (local.get $dilW)) (local.get $left)))
            (local.set $c0 (call $first (local.get $offC) (local.get $sW)))
            (local.set $c1 (call $end (local.get $offC) (local.get $sW) (local.get $inW) (local.get $outW)))
            (if (i32.lt_s (local.get $c0) (local.get $c1))
              (then
                (local.set $cols (i32.sub (local.get $c1) (local.get $c0)))
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
                    (i32.mul (i32.add (i32.mul (local.get $wR) (local.get $fW)) (local.get $wC)) (local.get $dc))))
                (if (i32.eq (local.get $m) (i32.const 1))
                  (then
                    (local.set $q (i32.const 0))
                    (block $done16
                      (loop $by16
                        (br_if $done16 (i32.gt_s (i32.add (local.get $q) (i32.const 16)) (local.get $outC)))
                        (call $lanes16
                          (i32.add (local.get $tapX) (i32.shl (local.get $q) (i32.const 2)))
                          (i32.add (local.get $tapDy) (i32.shl (local.get $q) (i32.const 2)))
                          (i32.add (local.get $tapOut) (i32.shl (local.get $q) (i32.const 2)))
                          (local.get $batch) (local.get $rows) (local.get $cols)
                          (local.get $xc) (local.get $xr) (local.get $xb)
                          (local.get $dc) (local.get $dr) (local.get $db))
                        (local.set $q (i32.add (local.get $q) (i32.const 16)))
                        (br $by16)))
                    (block $done4
                      (loop $by4
                        (br_if $done4 (i32.gt_s (i32.add (local.get $q) (i32.const 4)) (local.get $outC)))
                        (call $lanes4
                          (i32.add (local.get $tapX) (i32.shl (local.get $q) (i32.const 2)))
                          (i32.add (local.get $tapDy) (i32.shl (local.get $q) (i32.const 2)))
                          (i32.add (local.get $tapOut) (i32.shl (local.get $q) (i32.const 2)))
                          (local.get $batch) (local.get $rows) (local.get $cols)
                          (local.get $xc) (local.get $xr) (local.get $xb)
                          (local.get $dc) (local.get $dr) (local.get $db))
                        (local.set $q (i32.add (local.get $q) (i32.const 4)))
                        (br $by4)))
                    (block $done1
                      (loop $by1
                        (br_if $done1 (i32.ge_s (local.get $q) (local.get $outC)))
                        (call $single
                          (i32.add (local.get $tapX) (i32.shl (local.get $q) (i32.const 2)))
                          (i32.add (local.get $tapDy) (i32.shl (local.get $q) (i32.const 2)))
                          (i32.add (local.get $tapOut) (i32.shl (local.get $q) (i32.const 2)))
                          (local.get $batch) (local.get $rows) (local.get $cols)
                          (local.get $xc) (local.get $xr) (local.get $xb)
                          (local.get $dc) (local.get $dr) (local.get $db))
                        (local.set $q (i32.add (local.get $q) (i32.const 1)))
                        (br $by1))))
                  (else
                    (local.set $d1 (i32.const 0))
                    (loop $inChannels
                      (local.set $xp (i32.add (local.get $tapX) (i32.shl (local.get $d1) (i32.const 2))))
                      (local.set $dp
                        (i32.add (local.get $tapDy) (i32.shl (i32.mul (local.get $d1) (local.get $m)) (i32.const 2))))
                      (local.set $op
                        (i32.add (local.get $tapOut) (i32.shl (i32.mul (local.get $d1) (local.get $m)) (i32.const 2))))
                      (local.set $dm (i32.const 0))
                      (block $done4
                        (loop $by4
                          (br_if $done4 (i32.gt_s (i32.add (local.get $dm) (i32.const 4)) (local.get $m)))
                          (call $broadcast4
                            (local.get $xp)
                            (i32.add (local.get $dp) (i32.shl (local.get $dm) (i32.const 2)))
                            (i32.add (local.get $op) (i32.shl (local.get $dm) (i32.const 2)))
                            (local.get $batch) (local.get $rows) (local.get $cols)
                            (local.get $xc) (local.get $xr) (local.get $xb)
                            (local.get $dc) (local.get $dr) (local.get $db))
                          (local.set $dm (i32.add (local.get $dm) (i32.const 4)))
                          (br $by4)))
                      (block $done1
                        (loop $by1
                          (br_if $done1 (i32.ge_s (local.get $dm) (local.get $m)))
                          (call $single
                            (local.get $xp)
                            (i32.add (local.get $dp) (i32.shl (local.get $dm) (i32.const 2)))
                            (i32.add (local.get $op) (i32.shl (local.get $dm) (i32.const 2)))
                            (local.get $batch) (local.get $rows) (local.get $cols)
                            (local.get $xc) (local.get $xr) (local.get $xb)
                            (local.get $dc) (local.get $dr) (local.get $db))
                          (local.set $dm (i32.add (local.get $dm) (i32.const 1)))
                          (br $by1)))
                      (br_if $inChannels
                        (i32.lt_s (local.tee $d1 (i32.add (local.get $d1) (i32.const 1))) (local.get $inC))))))))
            (br_if $tapCols (i32.lt_s (local.tee $wC (i32.add (local.get $wC) (i32.const 1))) (local.get $fW))))))
      (br_if $tapRows (i32.lt_s (local.tee $wR (i32.add (local.get $wR) (i32.const 1))) (local.get $fH))))))
