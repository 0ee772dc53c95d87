;; Batched matrix product, either operand optionally transposed, computed in place on the memory
;; of TensorFlow.js's wasm backend: out[i] = op(a[i]) x op(b[i]), op transposing where asked, with
;; a batch of one broadcast against the other. These are a dense layer's products: x W forward,
;; and x^T dy and dy W^T backward, which the backend computes with a scalar loop.
;;
;; A transposed operand is first copied untransposed into scratch memory, so that one product
;; serves all cases: C[m, n] = sum over k of A[m, k] * B[k, n], broadcasting A[m, k] over a row
;; of B. Rows of C go in pairs, 16 columns at a time in eight registers; the columns left over
;; and an odd last row are accumulated 16, 8 or 4 columns at a time, then one by one.
;;
;; A layer's input is often mostly zeros (the background of an image, the units a relu turned
;; off), and a zero of A adds nothing. So for each pair of rows the positions k where either row
;; is not zero are listed first (in `list`, k entries of scratch), and when they are fewer than
;; seven eighths of k the 16-column blocks of the pair go over the listed positions only. The
;; sums keep their order; only terms 0 * B[k, n] are left out (which differs only where B holds
;; an infinity or NaN, where the dense sum would be NaN).
(module
  (import "env" "memory" (memory 0))

  ;; src [rows, cols] to dst [cols, rows].
  (func $transpose (param $src i32) (param $dst i32) (param $rows i32) (param $cols i32)
    (local $r i32) (local $c i32) (local $from i32) (local $to i32) (local $dstRowBytes i32)
    (local.set $dstRowBytes (i32.shl (local.get $rows) (i32.const 2)))
    (local.set $from (local.get $src))
    (local.set $r (i32.const 0))
    (loop $srcRows
      (local.set $to (i32.add (local.get $dst) (i32.shl (local.get $r) (i32.const 2))))
      (local.set $c (local.get $cols))
      (loop $srcCols
        (f32.store (local.get $to) (f32.load (local.get $from)))
        (local.set $from (i32.add (local.get $from) (i32.const 4)))
        (local.set $to (i32.add (local.get $to) (local.get $dstRowBytes)))
        (br_if $srcCols (local.tee $c (i32.sub (local.get $c) (i32.const 1)))))
      (br_if $srcRows (i32.lt_s (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $rows)))))

  ;; The dot products below take row `ap` of A (k floats apart by 4 bytes) and columns starting
  ;; at `bp` of B (rows `bRowBytes` apart), and store 16, 8, 4 or 1 results at `cp`.

  (func $columns16 (param $ap i32) (param $bp i32) (param $cp i32) (param $k i32) (param $bRowBytes i32)
    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $s v128)
    (loop $inner
      (local.set $s (v128.load32_splat (local.get $ap)))
      (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $bp)))))
      (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $bp)))))
      (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $s) (v128.load offset=32 (local.get $bp)))))
      (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $s) (v128.load offset=48 (local.get $bp)))))
      (local.set $ap (i32.add (local.get $ap) (i32.const 4)))
      (local.set $bp (i32.add (local.get $bp) (local.get $bRowBytes)))
      (br_if $inner (local.tee $k (i32.sub (local.get $k) (i32.const 1)))))
    (v128.store (local.get $cp) (local.get $a0))
    (v128.store offset=16 (local.get $cp) (local.get $a1))
    (v128.store offset=32 (local.get $cp) (local.get $a2))
    (v128.store offset=48 (local.get $cp) (local.get $a3)))

  (func $columns8 (param $ap i32) (param $bp i32) (param $cp i32) (param $k i32) (param $bRowBytes i32)
    (local $a0 v128) (local $a1 v128) (local $s v128)
    (loop $inner
      (local.set $s (v128.load32_splat (local.get $ap)))
      (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s) (v128.load (local.get $bp)))))
      (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s) (v128.load offset=16 (local.get $bp)))))
      (local.set $ap (i32.add (local.get $ap) (i32.const 4)))
      (local.set $bp (i32.add (local.get $bp) (local.get $bRowBytes)))
      (br_if $inner (local.tee $k (i32.sub (local.get $k) (i32.const 1)))))
    (v128.store (local.get $cp) (local.get $a0))
    (v128.store offset=16 (local.get $cp) (local.get $a1)))

  (func $columns4 (param $ap i32) (param $bp i32) (param $cp i32) (param $k i32) (param $bRowBytes i32)
    (local $a0 v128)
    (loop $inner
      (local.set $a0
        (f32x4.add (local.get $a0) (f32x4.mul (v128.load32_splat (local.get $ap)) (v128.load (local.get $bp)))))
      (local.set $ap (i32.add (local.get $ap) (i32.const 4)))
      (local.set $bp (i32.add (local.get $bp) (local.get $bRowBytes)))
      (br_if $inner (local.tee $k (i32.sub (local.get $k) (i32.const 1)))))
    (v128.store (local.get $cp) (local.get $a0)))

  (func $column1 (param $ap i32) (param $bp i32) (param $cp i32) (param $k i32) (param $bRowBytes i32)
    (local $a0 f32)
    (loop $inner
      (local.set $a0 (f32.add (local.get $a0) (f32.mul (f32.load (local.get $ap)) (f32.load (local.get $bp)))))
      (local.set $ap (i32.add (local.get $ap) (i32.const 4)))
      (local.set $bp (i32.add (local.get $bp) (local.get $bRowBytes)))
      (br_if $inner (local.tee $k (i32.sub (local.get $k) (i32.const 1)))))
    (f32.store (local.get $cp) (local.get $a0)))

  ;; Two rows of A (`ap`, and `aRowBytes` further) times 16 columns of B: eight accumulators,
  ;; so that each load of B serves two rows and the additions of one step do not wait on each
  ;; other; the results go to `cp` and `cRowBytes` further.
  (func $rows2columns16 (param $ap i32) (param $bp i32) (param $cp i32) (param $k i32) (param $bRowBytes i32)
    (param $aRowBytes i32) (param $cRowBytes i32)
    (local $ap1 i32) (local $s0 v128) (local $s1 v128) (local $b0 v128) (local $b1 v128) (local $b2 v128)
    (local $b3 v128) (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $a4 v128)
    (local $a5 v128) (local $a6 v128) (local $a7 v128)
    (local.set $ap1 (i32.add (local.get $ap) (local.get $aRowBytes)))
    (loop $inner
      (local.set $s0 (v128.load32_splat (local.get $ap)))
      (local.set $s1 (v128.load32_splat (local.get $ap1)))
      (local.set $b0 (v128.load (local.get $bp)))
      (local.set $b1 (v128.load offset=16 (local.get $bp)))
      (local.set $b2 (v128.load offset=32 (local.get $bp)))
      (local.set $b3 (v128.load offset=48 (local.get $bp)))
      (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s0) (local.get $b0))))
      (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s0) (local.get $b1))))
      (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $s0) (local.get $b2))))
      (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $s0) (local.get $b3))))
      (local.set $a4 (f32x4.add (local.get $a4) (f32x4.mul (local.get $s1) (local.get $b0))))
      (local.set $a5 (f32x4.add (local.get $a5) (f32x4.mul (local.get $s1) (local.get $b1))))
      (local.set $a6 (f32x4.add (local.get $a6) (f32x4.mul (local.get $s1) (local.get $b2))))
      (local.set $a7 (f32x4.add (local.get $a7) (f32x4.mul (local.get $s1) (local.get $b3))))
      (local.set $ap (i32.add (local.get $ap) (i32.const 4)))
      (local.set $ap1 (i32.add (local.get $ap1) (i32.const 4)))
      (local.set $bp (i32.add (local.get $bp) (local.get $bRowBytes)))
      (br_if $inner (local.tee $k (i32.sub (local.get $k) (i32.const 1)))))
    (v128.store (local.get $cp) (local.get $a0))
    (v128.store offset=16 (local.get $cp) (local.get $a1))
    (v128.store offset=32 (local.get $cp) (local.get $a2))
    (v128.store offset=48 (local.get $cp) (local.get $a3))
    (local.set $cp (i32.add (local.get $cp) (local.get $cRowBytes)))
    (v128.store (local.get $cp) (local.get $a4))
    (v128.store offset=16 (local.get $cp) (local.get $a5))
    (v128.store offset=32 (local.get $cp) (local.get $a6))
    (v128.store offset=48 (local.get $cp) (local.get $a7)))

  ;; The same over the positions listed at `list` (`count` of them, at least 1, each the byte
  ;; offset of a position k in a row of A); `bp` is column 0 of the block in B's row 0.
  (func $rows2columns16listed (param $ap i32) (param $bp i32) (param $cp i32) (param $list i32) (param $count i32)
    (param $bRowBytes i32) (param $aRowBytes i32) (param $cRowBytes i32)
    (local $ap1 i32) (local $end i32) (local $off i32) (local $row i32) (local $s0 v128) (local $s1 v128)
    (local $b0 v128) (local $b1 v128) (local $b2 v128) (local $b3 v128) (local $a0 v128) (local $a1 v128)
    (local $a2 v128) (local $a3 v128) (local $a4 v128) (local $a5 v128) (local $a6 v128) (local $a7 v128)
    (local.set $ap1 (i32.add (local.get $ap) (local.get $aRowBytes)))
    (local.set $end (i32.add (local.get $list) (i32.shl (local.get $count) (i32.const 2))))
    (loop $inner
      (local.set $off (i32.load (local.get $list)))
      (local.set $row
        (i32.add (local.get $bp) (i32.mul (i32.shr_u (local.get $off) (i32.const 2)) (local.get $bRowBytes))))
      (local.set $s0 (v128.load32_splat (i32.add (local.get $ap) (local.get $off))))
      (local.set $s1 (v128.load32_splat (i32.add (local.get $ap1) (local.get $off))))
      (local.set $b0 (v128.load (local.get $row)))
      (local.set $b1 (v128.load offset=16 (local.get $row)))
      (local.set $b2 (v128.load offset=32 (local.get $row)))
      (local.set $b3 (v128.load offset=48 (local.get $row)))
      (local.set $a0 (f32x4.add (local.get $a0) (f32x4.mul (local.get $s0) (local.get $b0))))
      (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $s0) (local.get $b1))))
      (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $s0) (local.get $b2))))
      (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $s0) (local.get $b3))))
      (local.set $a4 (f32x4.add (local.get $a4) (f32x4.mul (local.get $s1) (local.get $b0))))
      (local.set $a5 (f32x4.add (local.get $a5) (f32x4.mul (local.get $s1) (local.get $b1))))
      (local.set $a6 (f32x4.add (local.get $a6) (f32x4.mul (local.get $s1) (local.get $b2))))
      (local.set $a7 (f32x4.add (local.get $a7) (f32x4.mul (local.get $s1) (local.get $b3))))
      (br_if $inner (i32.lt_u (local.tee $list (i32.add (local.get $list) (i32.const 4))) (local.get $end))))
    (v128.store (local.get $cp) (local.get $a0))
    (v128.store offset=16 (local.get $cp) (local.get $a1))
    (v128.store offset=32 (local.get $cp) (local.get $a2))
    (v128.store offset=48 (local.get $cp) (local.get $a3))
    (local.set $cp (i32.add (local.get $cp) (local.get $cRowBytes)))
    (v128.store (local.get $cp) (local.get $a4))
    (v128.store offset=16 (local.get $cp) (local.get $a5))
    (v128.store offset=32 (local.get $cp) (local.get $a6))
    (v128.store offset=48 (local.get $cp) (local.get $a7)))

  ;; Two rows of 16 zeros at `cp` and `cRowBytes` further (a pair of rows of A that is all zero).
  (func $zero16 (param $cp i32) (param $cRowBytes i32)
    (v128.store (local.get $cp) (v128.const i32x4 0 0 0 0))
    (v128.store offset=16 (local.get $cp) (v128.const i32x4 0 0 0 0))
    (v128.store offset=32 (local.get $cp) (v128.const i32x4 0 0 0 0))
    (v128.store offset=48 (local.get $cp) (v128.const i32x4 0 0 0 0))
    (local.set $cp (i32.add (local.get $cp) (local.get $cRowBytes)))
    (v128.store (local.get $cp) (v128.const i32x4 0 0 0 0))
    (v128.store offset=16 (local.get $cp) (v128.const i32x4 0 0 0 0))
    (v128.store offset=32 (local.get $cp) (v128.const i32x4 0 0 0 0))
    (v128.store offset=48 (local.get $cp) (v128.const i32x4 0 0 0 0)))

  ;; How many of the positions (0 to k - 1) are not zero (either sign) in row `ap` or the row
  ;; `aRowBytes` further: four at a time, then one by one. A dense pair is told from this count
  ;; at a quarter of the cost of listing its positions.
  (func $nonzeroCount (param $ap i32) (param $aRowBytes i32) (param $k i32) (result i32)
    (local $ap1 i32) (local $off i32) (local $end4 i32) (local $end i32) (local $counts v128) (local $count i32)
    (local.set $ap1 (i32.add (local.get $ap) (local.get $aRowBytes)))
    (local.set $end (i32.shl (local.get $k) (i32.const 2)))
    (local.set $end4 (i32.shl (i32.and (local.get $k) (i32.const -4)) (i32.const 2)))
    (block $done4
      (loop $by4
        (br_if $done4 (i32.ge_u (local.get $off) (local.get $end4)))
        ;; A lane is -1 where either row is not zero; subtracting counts it.
        (local.set $counts
          (i32x4.sub (local.get $counts)
            (i32x4.ne
              (v128.and
                (v128.or (v128.load (i32.add (local.get $ap) (local.get $off)))
                  (v128.load (i32.add (local.get $ap1) (local.get $off))))
                (v128.const i32x4 0x7fffffff 0x7fffffff 0x7fffffff 0x7fffffff))
              (v128.const i32x4 0 0 0 0))))
        (local.set $off (i32.add (local.get $off) (i32.const 16)))
        (br $by4)))
    (local.set $count
      (i32.add
        (i32.add (i32x4.extract_lane 0 (local.get $counts)) (i32x4.extract_lane 1 (local.get $counts)))
        (i32.add (i32x4.extract_lane 2 (local.get $counts)) (i32x4.extract_lane 3 (local.get $counts)))))
    (block $done1
      (loop $by1
        (br_if $done1 (i32.ge_u (local.get $off) (local.get $end)))
        (local.set $count
          (i32.add (local.get $count)
            (i32.ne
              (i32.and
                (i32.or (i32.load (i32.add (local.get $ap) (local.get $off)))
                  (i32.load (i32.add (local.get $ap1) (local.get $off))))
                (i32.const 0x7fffffff))
              (i32.const 0))))
        (local.set $off (i32.add (local.get $off) (i32.const 4)))
        (br $by1)))
    (local.get $count))

  ;; Lists at `list` the byte offsets of the positions (0 to k - 1) where row `ap` or the row
  ;; `aRowBytes` further is not zero (either sign), in order, and returns how many there are.
  (func $nonzeroPositions (param $ap i32) (param $aRowBytes i32) (param $k i32) (param $list i32) (result i32)
    (local $ap1 i32) (local $off i32) (local $end i32) (local $at i32)
    (local.set $ap1 (i32.add (local.get $ap) (local.get $aRowBytes)))
    (local.set $end (i32.shl (local.get $k) (i32.const 2)))
    (local.set $at (local.get $list))
    (loop $scan
      ;; Written every time, kept only when counted: no branch on the data.
      (i32.store (local.get $at) (local.get $off))
      (local.set $at
        (i32.add (local.get $at)
          (i32.shl
            (i32.ne
              (i32.and
                (i32.or (i32.load (i32.add (local.get $ap) (local.get $off)))
                  (i32.load (i32.add (local.get $ap1) (local.get $off))))
                (i32.const 0x7fffffff))
              (i32.const 0))
            (i32.const 2))))
      (br_if $scan (i32.lt_u (local.tee $off (i32.add (local.get $off) (i32.const 4))) (local.get $end))))
    (i32.shr_u (i32.sub (local.get $at) (local.get $list)) (i32.const 2)))

  ;; Row `ap` of A times columns `col` to n of B [k, n], into the row of C at `cp`.
  (func $rowFrom (param $ap i32) (param $b i32) (param $cp i32) (param $k i32) (param $n i32) (param $col i32)
    (local $bRowBytes i32)
    (local.set $bRowBytes (i32.shl (local.get $n) (i32.const 2)))
    (block $done16
      (loop $by16
        (br_if $done16 (i32.gt_s (i32.add (local.get $col) (i32.const 16)) (local.get $n)))
        (call $columns16 (local.get $ap) (i32.add (local.get $b) (i32.shl (local.get $col) (i32.const 2)))
          (i32.add (local.get $cp) (i32.shl (local.get $col) (i32.const 2))) (local.get $k) (local.get $bRowBytes))
        (local.set $col (i32.add (local.get $col) (i32.const 16)))
        (br $by16)))
    (if (i32.le_s (i32.add (local.get $col) (i32.const 8)) (local.get $n))
      (then
        (call $columns8 (local.get $ap) (i32.add (local.get $b) (i32.shl (local.get $col) (i32.const 2)))
          (i32.add (local.get $cp) (i32.shl (local.get $col) (i32.const 2))) (local.get $k) (local.get $bRowBytes))
        (local.set $col (i32.add (local.get $col) (i32.const 8)))))
    (if (i32.le_s (i32.add (local.get $col) (i32.const 4)) (local.get $n))
      (then
        (call $columns4 (local.get $ap) (i32.add (local.get $b) (i32.shl (local.get $col) (i32.const 2)))
          (i32.add (local.get $cp) (i32.shl (local.get $col) (i32.const 2))) (local.get $k) (local.get $bRowBytes))
        (local.set $col (i32.add (local.get $col) (i32.const 4)))))
    (block $done1
      (loop $by1
        (br_if $done1 (i32.ge_s (local.get $col) (local.get $n)))
        (call $column1 (local.get $ap) (i32.add (local.get $b) (i32.shl (local.get $col) (i32.const 2)))
          (i32.add (local.get $cp) (i32.shl (local.get $col) (i32.const 2))) (local.get $k) (local.get $bRowBytes))
        (local.set $col (i32.add (local.get $col) (i32.const 1)))
        (br $by1))))

  ;; C [m, n] = A [m, k] x B [k, n], all row-major; m, k and n at least 1. Rows go in pairs
  ;; through 16-column blocks (over the positions listed at `list` where the pair has few enough
  ;; nonzeros), then one at a time through the columns left and an odd last row.
  (func $product (param $a i32) (param $b i32) (param $c i32) (param $m i32) (param $k i32) (param $n i32)
    (param $list i32)
    (local $row i32) (local $col i32) (local $ap i32) (local $cp i32) (local $bRowBytes i32) (local $aRowBytes i32)
    (local $count i32) (local $listed i32)
    (local.set $bRowBytes (i32.shl (local.get $n) (i32.const 2)))
    (local.set $aRowBytes (i32.shl (local.get $k) (i32.const 2)))
    (local.set $ap (local.get $a))
    (local.set $cp (local.get $c))
    (local.set $row (i32.const 0))
    (block $pairsDone
      (loop $pairs
        (br_if $pairsDone (i32.gt_s (i32.add (local.get $row) (i32.const 2)) (local.get $m)))
        (local.set $col (i32.const 0))
        (local.set $listed (i32.const 0))
        ;; Counted first, listed only when few enough are not zero.
        (if (i32.ge_s (local.get $n) (i32.const 16))
          (then
            (local.set $count (call $nonzeroCount (local.get $ap) (local.get $aRowBytes) (local.get $k)))
            (local.set $listed
              (i32.lt_s (i32.shl (local.get $count) (i32.const 3)) (i32.mul (local.get $k) (i32.const 7))))
            (if (local.get $listed)
              (then
                (local.set $count
                  (call $nonzeroPositions (local.get $ap) (local.get $aRowBytes) (local.get $k) (local.get $list)))))))
        (block $done16
          (loop $by16
            (br_if $done16 (i32.gt_s (i32.add (local.get $col) (i32.const 16)) (local.get $n)))
            (if (local.get $listed)
              (then
                (if (local.get $count)
                  (then
                    (call $rows2columns16listed (local.get $ap)
                      (i32.add (local.get $b) (i32.shl (local.get $col) (i32.const 2)))
                      (i32.add (local.get $cp) (i32.shl (local.get $col) (i32.const 2))) (local.get $list)
                      (local.get $count) (local.get $bRowBytes) (local.get $aRowBytes) (local.get $bRowBytes)))
                  (else
                    (call $zero16 (i32.add (local.get $cp) (i32.shl (local.get $col) (i32.const 2)))
                      (local.get $bRowBytes)))))
              (else
                (call $rows2columns16 (local.get $ap) (i32.add (local.get $b) (i32.shl (local.get $col) (i32.const 2)))
                  (i32.add (local.get $cp) (i32.shl (local.get $col) (i32.const 2))) (local.get $k) (local.get $bRowBytes)
                  (local.get $aRowBytes) (local.get $bRowBytes))))
            (local.set $col (i32.add (local.get $col) (i32.const 16)))
            (br $by16)))
        (call $rowFrom (local.get $ap) (local.get $b) (local.get $cp) (local.get $k) (local.get $n) (local.get $col))
        (call $rowFrom (i32.add (local.get $ap) (local.get $aRowBytes)) (local.get $b)
          (i32.add (local.get $cp) (local.get $bRowBytes)) (local.get $k) (local.get $n) (local.get $col))
        (local.set $ap (i32.add (local.get $ap) (i32.shl (local.get $aRowBytes) (i32.const 1))))
        (local.set $cp (i32.add (local.get $cp) (i32.shl (local.get $bRowBytes) (i32.const 1))))
        (local.set $row (i32.add (local.get $row) (i32.const 2)))
        (br $pairs)))
    (if (i32.lt_s (local.get $row) (local.get $m))
      (then (call $rowFrom (local.get $ap) (local.get $b) (local.get $cp) (local.get $k) (local.get $n) (i32.const 0)))))

  ;; a holds batchA matrices, [m, k] or (transposeA) [k, m]; b holds batchB matrices, [k, n] or
  ;; (transposeB) [n, k]; out receives max(batchA, batchB) matrices [m, n]. A batch of 1 is
  ;; broadcast. `scratch` holds m * k floats when transposeA and then k * n floats when
  ;; transposeB; `list` holds k int32s. All sizes at least 1.
  (func (export "batch_mat_mul")
    (param $a i32) (param $b i32) (param $out i32) (param $scratch i32) (param $list i32)
    (param $batchA i32) (param $batchB i32) (param $m i32) (param $k i32) (param $n i32)
    (param $transposeA i32) (param $transposeB i32)
    (local $i i32) (local $batch i32) (local $aBytes i32) (local $bBytes i32) (local $outBytes i32)
    (local $aSrc i32) (local $bSrc i32) (local $pa i32) (local $pb i32) (local $scratchB i32)
    (local.set $aBytes (i32.shl (i32.mul (local.get $m) (local.get $k)) (i32.const 2)))
    (local.set $bBytes (i32.shl (i32.mul (local.get $k) (local.get $n)) (i32.const 2)))
    (local.set $outBytes (i32.shl (i32.mul (local.get $m) (local.get $n)) (i32.const 2)))
    (local.set $scratchB
      (select (i32.add (local.get $scratch) (local.get $aBytes)) (local.get $scratch) (local.get $transposeA)))
    (local.set $batch
      (select (local.get $batchA) (local.get $batchB) (i32.gt_s (local.get $batchA) (local.get $batchB))))
    (local.set $i (i32.const 0))
    (loop $matrices
      (local.set $aSrc
        (i32.add (local.get $a)
          (i32.mul (select (i32.const 0) (local.get $i) (i32.eq (local.get $batchA) (i32.const 1))) (local.get $aBytes))))
      (local.set $bSrc
        (i32.add (local.get $b)
          (i32.mul (select (i32.const 0) (local.get $i) (i32.eq (local.get $batchB) (i32.const 1))) (local.get $bBytes))))
      (local.set $pa (local.get $aSrc))
      (local.set $pb (local.get $bSrc))
      ;; A broadcast operand is transposed once, for the first matrix.
      (if (i32.and (local.get $transposeA) (i32.or (i32.eqz (local.get $i)) (i32.ne (local.get $batchA) (i32.const 1))))
        (then (call $transpose (local.get $aSrc) (local.get $scratch) (local.get $k) (local.get $m))))
      (if (local.get $transposeA) (then (local.set $pa (local.get $scratch))))
      (if (i32.and (local.get $transposeB) (i32.or (i32.eqz (local.get $i)) (i32.ne (local.get $batchB) (i32.const 1))))
        (then (call $transpose (local.get $bSrc) (local.get $scratchB) (local.get $n) (local.get $k))))
      (if (local.get $transposeB) (then (local.set $pb (local.get $scratchB))))
      (call $product (local.get $pa) (local.get $pb)
        (i32.add (local.get $out) (i32.mul (local.get $i) (local.get $outBytes)))
        (local.get $m) (local.get $k) (local.get $n) (local.get $list))
      (br_if $matrices (i32.lt_s (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $batch))))))
