;; Snappy block decoding and CRC-32C, the hot path of reading snappy-framed RecordIO chunks (see
;; snappy-wasm.ts, which copies blocks in and out of this module's own memory).
;;
;; Memory layout, built at instantiation: bytes [0, 16384) hold the 16 CRC-32C tables of
;; slicing-by-16, [16384, 16640) the swizzle masks that repeat a pattern of 1..15 bytes over 16,
;; [16640, 16656) the strides that go with them. Callers may use everything from
;; `workspaceStart` on. Addresses and lengths are byte offsets.
;;
;; `uncompress` decodes one raw snappy block (https://github.com/google/snappy/blob/main/format_description.txt).
;; It reads only [src, src + srcLen) and the output written so far, writes only [dst, dst + dstLen),
;; whatever the input, and returns the number of bytes written (always dstLen) or one of these
;; negative codes:
;;   -1  the length preamble is cut short or longer than 5 bytes
;;   -2  the preamble's length differs from dstLen
;;   -3  a literal runs past the end of the input
;;   -4  a literal runs past the end of the output
;;   -5  a copy's offset is 0 or reaches before the start of the output
;;   -6  a copy runs past the end of the output
;;   -7  the input ends inside a tag (its length or offset bytes)
;;   -8  the input ends before dstLen bytes are written
;; The two areas must not overlap.
;;
;; Most elements are short (a Fashion-MNIST record is about 26 literals and 41 copies, most under
;; 16 bytes), so the cost of a `memory.copy` call would dominate. Where at least 15 bytes of room
;; remain past an element in both buffers, it moves in 16-byte loads and stores instead, whose
;; last store may run past the element into bytes that later elements overwrite; a copy whose
;; offset is under 16 first repeats its pattern over 16 bytes with a swizzle. Near the ends of
;; the buffers the exact-length bulk operations take over, so the bounds above hold.
(module
  (memory (export "memory") 2)

  ;; Where callers' data may start: past the tables, rounded up to 64 bytes.
  (func (export "workspaceStart") (result i32) (i32.const 16704))

  ;; Table 0 is the bytewise CRC-32C table of the reflected polynomial 0x82F63B78; table k (at
  ;; byte 1024 * k) advances table k-1's entry by one more zero byte. The mask for a pattern of
  ;; d bytes (at 16384 + 16 * d) holds i mod d at byte i; its stride (the byte at 16640 + d) is
  ;; the smallest multiple of d from 16 on, how far back 16 bytes already repeat the pattern.
  (func $buildTables
    (local $i i32) (local $c i32) (local $bit i32) (local $at i32) (local $prev i32) (local $d i32)
    (block $table0Done
      (loop $table0
        (br_if $table0Done (i32.ge_u (local.get $i) (i32.const 256)))
        (local.set $c (local.get $i))
        (local.set $bit (i32.const 0))
        (loop $bits
          (local.set $c
            (i32.xor
              (i32.shr_u (local.get $c) (i32.const 1))
              (i32.and (i32.const 0x82F63B78) (i32.sub (i32.const 0) (i32.and (local.get $c) (i32.const 1))))))
          (local.set $bit (i32.add (local.get $bit) (i32.const 1)))
          (br_if $bits (i32.lt_u (local.get $bit) (i32.const 8))))
        (i32.store (i32.shl (local.get $i) (i32.const 2)) (local.get $c))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $table0)))
    (local.set $at (i32.const 1024))
    (block $restDone
      (loop $rest
        (br_if $restDone (i32.ge_u (local.get $at) (i32.const 16384)))
        (local.set $prev (i32.load (i32.sub (local.get $at) (i32.const 1024))))
        (i32.store (local.get $at)
          (i32.xor
            (i32.shr_u (local.get $prev) (i32.const 8))
            (i32.load (i32.shl (i32.and (local.get $prev) (i32.const 0xff)) (i32.const 2)))))
        (local.set $at (i32.add (local.get $at) (i32.const 4)))
        (br $rest)))
    (local.set $d (i32.const 1))
    (loop $patterns
      (local.set $i (i32.const 0))
      (loop $maskBytes
        (i32.store8 offset=16384
          (i32.add (i32.shl (local.get $d) (i32.const 4)) (local.get $i))
          (i32.rem_u (local.get $i) (local.get $d)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $maskBytes (i32.lt_u (local.get $i) (i32.const 16))))
      (i32.store8 offset=16640 (local.get $d)
        (i32.mul (local.get $d) (i32.div_u (i32.add (local.get $d) (i32.const 15)) (local.get $d))))
      (local.set $d (i32.add (local.get $d) (i32.const 1)))
      (br_if $patterns (i32.lt_u (local.get $d) (i32.const 16)))))
  (start $buildTables)

  ;; CRC-32C (Castagnoli) of [p, p + n), continuing `seed`, the CRC-32C of the bytes before
  ;; (0 for none): as crc-32's `crc32c.buf(data, seed)`, so a long input can go through in
  ;; pieces. Sixteen bytes a step through the sixteen tables, then byte by byte.
  (func (export "crc32c") (param $p i32) (param $n i32) (param $seed i32) (result i32)
    (local $crc i32) (local $end i32) (local $blocksEnd i32) (local $a i32) (local $b i32) (local $c i32) (local $d i32)
    (local.set $crc (i32.xor (local.get $seed) (i32.const -1)))
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (local.set $blocksEnd (i32.add (local.get $p) (i32.and (local.get $n) (i32.const -16))))
    (block $blocksDone
      (loop $blocks
        (br_if $blocksDone (i32.ge_u (local.get $p) (local.get $blocksEnd)))
        (local.set $a (i32.xor (i32.load (local.get $p)) (local.get $crc)))
        (local.set $b (i32.load offset=4 (local.get $p)))
        (local.set $c (i32.load offset=8 (local.get $p)))
        (local.set $d (i32.load offset=12 (local.get $p)))
        ;; Byte j of the 16 goes through table 15 - j. (x >>> 8k & 0xff) * 4, the byte offset of
        ;; byte k of x in a table, is (x >>> (8k - 2)) & 0x3fc.
        (local.set $crc
          (i32.xor
            (i32.xor
              (i32.xor
                (i32.xor
                  (i32.load offset=15360 (i32.and (i32.shl (local.get $a) (i32.const 2)) (i32.const 0x3fc)))
                  (i32.load offset=14336 (i32.and (i32.shr_u (local.get $a) (i32.const 6)) (i32.const 0x3fc))))
                (i32.xor
                  (i32.load offset=13312 (i32.and (i32.shr_u (local.get $a) (i32.const 14)) (i32.const 0x3fc)))
                  (i32.load offset=12288 (i32.and (i32.shr_u (local.get $a) (i32.const 22)) (i32.const 0x3fc)))))
              (i32.xor
                (i32.xor
                  (i32.load offset=11264 (i32.and (i32.shl (local.get $b) (i32.const 2)) (i32.const 0x3fc)))
                  (i32.load offset=10240 (i32.and (i32.shr_u (local.get $b) (i32.const 6)) (i32.const 0x3fc))))
                (i32.xor
                  (i32.load offset=9216 (i32.and (i32.shr_u (local.get $b) (i32.const 14)) (i32.const 0x3fc)))
                  (i32.load offset=8192 (i32.and (i32.shr_u (local.get $b) (i32.const 22)) (i32.const 0x3fc))))))
            (i32.xor
              (i32.xor
                (i32.xor
                  (i32.load offset=7168 (i32.and (i32.shl (local.get $c) (i32.const 2)) (i32.const 0x3fc)))
                  (i32.load offset=6144 (i32.and (i32.shr_u (local.get $c) (i32.const 6)) (i32.const 0x3fc))))
                (i32.xor
                  (i32.load offset=5120 (i32.and (i32.shr_u (local.get $c) (i32.const 14)) (i32.const 0x3fc)))
                  (i32.load offset=4096 (i32.and (i32.shr_u (local.get $c) (i32.const 22)) (i32.const 0x3fc)))))
              (i32.xor
                (i32.xor
                  (i32.load offset=3072 (i32.and (i32.shl (local.get $d) (i32.const 2)) (i32.const 0x3fc)))
                  (i32.load offset=2048 (i32.and (i32.shr_u (local.get $d) (i32.const 6)) (i32.const 0x3fc))))
                (i32.xor
                  (i32.load offset=1024 (i32.and (i32.shr_u (local.get $d) (i32.const 14)) (i32.const 0x3fc)))
                  (i32.load (i32.and (i32.shr_u (local.get $d) (i32.const 22)) (i32.const 0x3fc))))))))
        (local.set $p (i32.add (local.get $p) (i32.const 16)))
        (br $blocks)))
    (block $bytesDone
      (loop $bytes
        (br_if $bytesDone (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $crc
          (i32.xor
            (i32.load
              (i32.shl
                (i32.and (i32.xor (local.get $crc) (i32.load8_u (local.get $p))) (i32.const 0xff))
                (i32.const 2)))
            (i32.shr_u (local.get $crc) (i32.const 8))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $bytes)))
    (i32.xor (local.get $crc) (i32.const -1)))

  ;; Decodes the snappy block [src, src + srcLen) into [dst, dst + dstLen); see the top of the file.
  (func (export "uncompress")
    (param $src i32) (param $srcLen i32) (param $dst i32) (param $dstLen i32) (result i32)
    (local $ip i32) (local $ipEnd i32) (local $op i32) (local $opEnd i32)
    (local $declared i64) (local $shift i64) (local $byte i32)
    (local $tag i32) (local $len i32) (local $extra i32) (local $offset i32) (local $from i32) (local $target i32)
    (local $q i32) (local $stride i32) (local $chunk i32)
    (local.set $ip (local.get $src))
    (local.set $ipEnd (i32.add (local.get $src) (local.get $srcLen)))
    (local.set $op (local.get $dst))
    (local.set $opEnd (i32.add (local.get $dst) (local.get $dstLen)))

    ;; The preamble: the uncompressed length as a little-endian base-128 varint of at most 5 bytes.
    (block $preambleDone
      (loop $preamble
        (if (i32.ge_u (local.get $ip) (local.get $ipEnd)) (then (return (i32.const -1))))
        (local.set $byte (i32.load8_u (local.get $ip)))
        (local.set $ip (i32.add (local.get $ip) (i32.const 1)))
        (local.set $declared
          (i64.or (local.get $declared)
            (i64.shl (i64.extend_i32_u (i32.and (local.get $byte) (i32.const 0x7f))) (local.get $shift))))
        (br_if $preambleDone (i32.lt_u (local.get $byte) (i32.const 0x80)))
        (local.set $shift (i64.add (local.get $shift) (i64.const 7)))
        (br_if $preamble (i64.lt_u (local.get $shift) (i64.const 35))))
      (return (i32.const -1)))
    (if (i64.ne (local.get $declared) (i64.extend_i32_u (local.get $dstLen))) (then (return (i32.const -2))))

    (block $done
      (loop $element
        (br_if $done (i32.ge_u (local.get $ip) (local.get $ipEnd)))
        (local.set $tag (i32.load8_u (local.get $ip)))
        (local.set $ip (i32.add (local.get $ip) (i32.const 1)))

        (if (i32.eqz (i32.and (local.get $tag) (i32.const 3)))
          (then
            ;; A literal: its length - 1 in the tag's upper 6 bits, or in the 1..4 bytes after it
            ;; when those bits are 60..63.
            (local.set $len (i32.add (i32.shr_u (local.get $tag) (i32.const 2)) (i32.const 1)))
            (if (i32.gt_u (local.get $len) (i32.const 60))
              (then
                (local.set $extra (i32.sub (local.get $len) (i32.const 60)))
                (if (i32.lt_u (i32.sub (local.get $ipEnd) (local.get $ip)) (local.get $extra))
                  (then (return (i32.const -7))))
                (local.set $len (i32.load8_u (local.get $ip)))
                (if (i32.gt_u (local.get $extra) (i32.const 1))
                  (then
                    (local.set $len
                      (i32.or (local.get $len) (i32.shl (i32.load8_u offset=1 (local.get $ip)) (i32.const 8))))))
                (if (i32.gt_u (local.get $extra) (i32.const 2))
                  (then
                    (local.set $len
                      (i32.or (local.get $len) (i32.shl (i32.load8_u offset=2 (local.get $ip)) (i32.const 16))))))
                (if (i32.gt_u (local.get $extra) (i32.const 3))
                  (then
                    (local.set $len
                      (i32.or (local.get $len) (i32.shl (i32.load8_u offset=3 (local.get $ip)) (i32.const 24))))))
                (local.set $ip (i32.add (local.get $ip) (local.get $extra)))
                ;; $len holds length - 1 here, up to 2^32 - 1: compare before adding 1 so it cannot wrap.
                (if (i32.ge_u (local.get $len) (i32.sub (local.get $ipEnd) (local.get $ip)))
                  (then (return (i32.const -3))))
                (local.set $len (i32.add (local.get $len) (i32.const 1))))
              (else
                (if (i32.gt_u (local.get $len) (i32.sub (local.get $ipEnd) (local.get $ip)))
                  (then (return (i32.const -3))))))
            (if (i32.gt_u (local.get $len) (i32.sub (local.get $opEnd) (local.get $op)))
              (then (return (i32.const -4))))
            ;; $len fits both buffers, so neither room below can wrap.
            (if (i32.and
                  (i32.le_u (local.get $len) (i32.const 128))
                  (i32.and
                    (i32.ge_u (i32.sub (i32.sub (local.get $ipEnd) (local.get $ip)) (local.get $len)) (i32.const 15))
                    (i32.ge_u (i32.sub (i32.sub (local.get $opEnd) (local.get $op)) (local.get $len)) (i32.const 15))))
              (then
                (local.set $q (i32.const 0))
                (loop $literalMoves
                  (v128.store (i32.add (local.get $op) (local.get $q)) (v128.load (i32.add (local.get $ip) (local.get $q))))
                  (local.set $q (i32.add (local.get $q) (i32.const 16)))
                  (br_if $literalMoves (i32.lt_u (local.get $q) (local.get $len)))))
              (else (memory.copy (local.get $op) (local.get $ip) (local.get $len))))
            (local.set $op (i32.add (local.get $op) (local.get $len)))
            (local.set $ip (i32.add (local.get $ip) (local.get $len)))
            (br $element)))

        ;; A copy of earlier output, at most 64 bytes: tag & 3 is 1 (1-byte offset), 2 (2-byte)
        ;; or 3 (4-byte).
        (if (i32.eq (i32.and (local.get $tag) (i32.const 3)) (i32.const 1))
          (then
            (if (i32.ge_u (local.get $ip) (local.get $ipEnd)) (then (return (i32.const -7))))
            (local.set $len (i32.add (i32.and (i32.shr_u (local.get $tag) (i32.const 2)) (i32.const 7)) (i32.const 4)))
            (local.set $offset
              (i32.or (i32.shl (i32.shr_u (local.get $tag) (i32.const 5)) (i32.const 8)) (i32.load8_u (local.get $ip))))
            (local.set $ip (i32.add (local.get $ip) (i32.const 1))))
          (else
            (local.set $len (i32.add (i32.shr_u (local.get $tag) (i32.const 2)) (i32.const 1)))
            (if (i32.eq (i32.and (local.get $tag) (i32.const 3)) (i32.const 2))
              (then
                (if (i32.lt_u (i32.sub (local.get $ipEnd) (local.get $ip)) (i32.const 2)) (then (return (i32.const -7))))
                (local.set $offset (i32.load16_u (local.get $ip)))
                (local.set $ip (i32.add (local.get $ip) (i32.const 2))))
              (else
                (if (i32.lt_u (i32.sub (local.get $ipEnd) (local.get $ip)) (i32.const 4)) (then (return (i32.const -7))))
                (local.set $offset (i32.load (local.get $ip)))
                (local.set $ip (i32.add (local.get $ip) (i32.const 4)))))))
        (if (i32.or
              (i32.eqz (local.get $offset))
              (i32.gt_u (local.get $offset) (i32.sub (local.get $op) (local.get $dst))))
          (then (return (i32.const -5))))
        (if (i32.gt_u (local.get $len) (i32.sub (local.get $opEnd) (local.get $op)))
          (then (return (i32.const -6))))
        (local.set $from (i32.sub (local.get $op) (local.get $offset)))
        (local.set $target (i32.add (local.get $op) (local.get $len)))

        (if (i32.ge_u (i32.sub (local.get $opEnd) (local.get $target)) (i32.const 15))
          (then
            ;; Room for 16-byte moves. Each loads 16 bytes that lie wholly before the store
            ;; cursor, `stride` bytes back, a multiple of the offset: bytes that repeat the pattern.
            (local.set $q (local.get $op))
            (local.set $stride (local.get $offset))
            (if (i32.lt_u (local.get $offset) (i32.const 16))
              (then
                ;; The first 16 bytes come from the pattern's first `offset` bytes, repeated;
                ;; the load's bytes past those, not yet written, are never picked.
                (v128.store (local.get $op)
                  (i8x16.swizzle
                    (v128.load (local.get $from))
                    (v128.load offset=16384 (i32.shl (local.get $offset) (i32.const 4)))))
                (local.set $q (i32.add (local.get $op) (i32.const 16)))
                (local.set $stride (i32.load8_u offset=16640 (local.get $offset)))))
            (block $movesDone
              (loop $moves
                (br_if $movesDone (i32.ge_u (local.get $q) (local.get $target)))
                (v128.store (local.get $q) (v128.load (i32.sub (local.get $q) (local.get $stride))))
                (local.set $q (i32.add (local.get $q) (i32.const 16)))
                (br $moves))))
          (else
            ;; Near the end of the output: exact-length bulk operations.
            (if (i32.ge_u (local.get $offset) (local.get $len))
              (then (memory.copy (local.get $op) (local.get $from) (local.get $len)))
              (else
                (if (i32.eq (local.get $offset) (i32.const 1))
                  (then (memory.fill (local.get $op) (i32.load8_u (local.get $from)) (local.get $len)))
                  (else
                    ;; The copy overlaps its source: [from, op) repeats with period offset, and
                    ;; so does [from, op) after each step, so copying all of it at once doubles
                    ;; the repeated run.
                    (loop $double
                      (local.set $chunk (i32.sub (local.get $op) (local.get $from)))
                      (if (i32.gt_u (local.get $chunk) (i32.sub (local.get $target) (local.get $op)))
                        (then (local.set $chunk (i32.sub (local.get $target) (local.get $op)))))
                      (memory.copy (local.get $op) (local.get $from) (local.get $chunk))
                      (local.set $op (i32.add (local.get $op) (local.get $chunk)))
                      (br_if $double (i32.lt_u (local.get $op) (local.get $target))))))))))
        (local.set $op (local.get $target))
        (br $element)))

    (if (i32.ne (local.get $op) (local.get $opEnd)) (then (return (i32.const -8))))
    (i32.sub (local.get $op) (local.get $dst)))
)
