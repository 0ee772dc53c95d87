;; Gradient of 2D max pooling (NHWC), computed in place on the memory of TensorFlow.js's wasm
;; backend: each output gradient goes to the first maximum of its window in row-major order
;; (padding never wins; a window of NaN or -Infinity only passes nothing), as the cpu backend
;; does. Four channels are pooled at once: the running maximum and where it lies are kept per
;; lane, and a lane moves only on a strictly greater value, so ties keep the first position.
(module
  (import "env" "memory" (memory 0))

  ;; x [batch, inH, inW, channels], dy [batch, outH, outW, channels] and out (shaped like x) are
  ;; byte addresses of float32 tensors.
  (func (export "max_pool_grad")
    (param $x i32) (param $dy i32) (param $out i32)
    (param $batch i32) (param $inH i32) (param $inW i32) (param $channels i32)
    (param $outH i32) (param $outW i32)
    (param $sH i32) (param $sW i32) (param $dilH i32) (param $dilW i32)
    (param $effH i32) (param $effW i32) (param $top i32) (param $left i32)
    (local $b i32) (local $yR i32) (local $yC i32) (local $xR0 i32) (local $xC0 i32)
    (local $wR i32) (local $wC i32) (local $xR i32) (local $xC i32)
    (local $imageBase i32) (local $pixel i32) (local $dyp i32) (local $d i32) (local $at i32)
    (local $best v128) (local $bestAt v128) (local $v v128) (local $gt v128)
    (local $bestScalar f32) (local $atScalar i32) (local $vs f32)
    (memory.fill (local.get $out) (i32.const 0)
      (i32.shl
        (i32.mul (i32.mul (local.get $batch) (local.get $inH)) (i32.mul (local.get $inW) (local.get $channels)))
        (i32.const 2)))
    (local.set $dyp (local.get $dy))
    (local.set $b (i32.const 0))
    (block $noImages
      (br_if $noImages (i32.le_s (local.get $batch) (i32.const 0)))
      (loop $images
        (local.set $imageBase (i32.mul (local.get $b) (local.get $inH)))
        (local.set $yR (i32.const 0))
        (loop $outRows
          (local.set $xR0 (i32.sub (i32.mul (local.get $yR) (local.get $sH)) (local.get $top)))
          (local.set $yC (i32.const 0))
          (loop $outCols
            (local.set $xC0 (i32.sub (i32.mul (local.get $yC) (local.get $sW)) (local.get $left)))
            (local.set $d (i32.const 0))
            (block $vectorsDone
              (loop $vectors
                (br_if $vectorsDone (i32.gt_s (i32.add (local.get $d) (i32.const 4)) (local.get $channels)))
                (local.set $best (v128.const f32x4 -inf -inf -inf -inf))
                (local.set $bestAt (v128.const i32x4 -1 -1 -1 -1))
                (local.set $wR (i32.const 0))
                (block $rowsDone
                  (loop $windowRows
                    (br_if $rowsDone (i32.ge_s (local.get $wR) (local.get $effH)))
                    (local.set $xR (i32.add (local.get $xR0) (local.get $wR)))
                    ;; One unsigned test rejects rows above and below the image alike.
                    (if (i32.lt_u (local.get $xR) (local.get $inH))
                      (then
                        (local.set $wC (i32.const 0))
                        (block $colsDone
                          (loop $windowCols
                            (br_if $colsDone (i32.ge_s (local.get $wC) (local.get $effW)))
                            (local.set $xC (i32.add (local.get $xC0) (local.get $wC)))
                            (if (i32.lt_u (local.get $xC) (local.get $inW))
                              (then
                                (local.set $pixel
                                  (i32.add
                                    (i32.mul
                                      (i32.add
                                        (i32.mul (i32.add (local.get $imageBase) (local.get $xR)) (local.get $inW))
                                        (local.get $xC))
                                      (local.get $channels))
                                    (local.get $d)))
                                (local.set $v (v128.load (i32.add (local.get $x) (i32.shl (local.get $pixel) (i32.const 2)))))
                                (local.set $gt (f32x4.gt (local.get $v) (local.get $best)))
                                (local.set $best (v128.bitselect (local.get $v) (local.get $best) (local.get $gt)))
                                (local.set $bestAt
                                  (v128.bitselect
                                    (i32x4.add (i32x4.splat (local.get $pixel)) (v128.const i32x4 0 1 2 3))
                                    (local.get $bestAt)
                                    (local.get $gt)))))
                            (local.set $wC (i32.add (local.get $wC) (local.get $dilW)))
                            (br $windowCols)))))
                    (local.set $wR (i32.add (local.get $wR) (local.get $dilH)))
                    (br $windowRows)))
                (local.set $at (i32x4.extract_lane 0 (local.get $bestAt)))
                (if (i32.ge_s (local.get $at) (i32.const 0))
                  (then
                    (local.set $at (i32.add (local.get $out) (i32.shl (local.get $at) (i32.const 2))))
                    (f32.store (local.get $at) (f32.add (f32.load (local.get $at)) (f32.load (local.get $dyp))))))
                (local.set $at (i32x4.extract_lane 1 (local.get $bestAt)))
                (if (i32.ge_s (local.get $at) (i32.const 0))
                  (then
                    (local.set $at (i32.add (local.get $out) (i32.shl (local.get $at) (i32.const 2))))
                    (f32.store (local.get $at) (f32.add (f32.load (local.get $at)) (f32.load offset=4 (local.get $dyp))))))
                (local.set $at (i32x4.extract_lane 2 (local.get $bestAt)))
                (if (i32.ge_s (local.get $at) (i32.const 0))
                  (then
                    (local.set $at (i32.add (local.get $out) (i32.shl (local.get $at) (i32.const 2))))
                    (f32.store (local.get $at) (f32.add (f32.load (local.get $at)) (f32.load offset=8 (local.get $dyp))))))
                (local.set $at (i32x4.extract_lane 3 (local.get $bestAt)))
                (if (i32.ge_s (local.get $at) (i32.const 0))
                  (then
                    (local.set $at (i32.add (local.get $out) (i32.shl (local.get $at) (i32.const 2))))
                    (f32.store (local.get $at) (f32.add (f32.load (local.get $at)) (f32.load offset=12 (local.get $dyp))))))
                (local.set $dyp (i32.add (local.get $dyp) (i32.const 16)))
                (local.set $d (i32.add (local.get $d) (i32.const 4)))
                (br $vectors)))
            ;; The channels left over after the last group of four, one at a time.
            (block $scalarsDone
              (loop $scalars
                (br_if $scalarsDone (i32.ge_s (local.get $d) (local.get $channels)))
                (local.set $bestScalar (f32.const -inf))
                (local.set $atScalar (i32.const -1))
                (local.set $wR (i32.const 0))
                (block $rowsDone
                  (loop $windowRows
                    (br_if $rowsDone (i32.ge_s (local.get $wR) (local.get $effH)))
                    (local.set $xR (i32.add (local.get $xR0) (local.get $wR)))
                    (if (i32.lt_u (local.get $xR) (local.get $inH))
                      (then
                        (local.set $wC (i32.const 0))
                        (block $colsDone
                          (loop $windowCols
                            (br_if $colsDone (i32.ge_s (local.get $wC) (local.get $effW)))
                            (local.set $xC (i32.add (local.get $xC0) (local.get $wC)))
                            (if (i32.lt_u (local.get $xC) (local.get $inW))
                              (then
                                (local.set $pixel
                                  (i32.add
                                    (i32.mul
                                      (i32.add
                                        (i32.mul (i32.add (local.get $imageBase) (local.get $xR)) (local.get $inW))
                                        (local.get $xC))
                                      (local.get $channels))
                                    (local.get $d)))
                                (local.set $vs (f32.load (i32.add (local.get $x) (i32.shl (local.get $pixel) (i32.const 2)))))
                                (if (f32.gt (local.get $vs) (local.get $bestScalar))
                                  (then
                                    (local.set $bestScalar (local.get $vs))
                                    (local.set $atScalar (local.get $pixel))))))
                            (local.set $wC (i32.add (local.get $wC) (local.get $dilW)))
                            (br $windowCols)))))
                    (local.set $wR (i32.add (local.get $wR) (local.get $dilH)))
                    (br $windowRows)))
                (if (i32.ge_s (local.get $atScalar) (i32.const 0))
                  (then
                    (local.set $at (i32.add (local.get $out) (i32.shl (local.get $atScalar) (i32.const 2))))
                    (f32.store (local.get $at) (f32.add (f32.load (local.get $at)) (f32.load (local.get $dyp))))))
                (local.set $dyp (i32.add (local.get $dyp) (i32.const 4)))
                (local.set $d (i32.add (local.get $d) (i32.const 1)))
                (br $scalars)))
            (br_if $outCols (i32.lt_s (local.tee $yC (i32.add (local.get $yC) (i32.const 1))) (local.get $outW))))
          (br_if $outRows (i32.lt_s (local.tee $yR (i32.add (local.get $yR) (i32.const 1))) (local.get $outH))))
        (br_if $images (i32.lt_s (local.tee $b (i32.add (local.get $b) (i32.const 1))) (local.get $batch)))))))
