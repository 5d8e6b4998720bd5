;; The routed expert FFN's row products on the CPU, WebAssembly SIMD128 (assembled to expert_ffn.wasm by
;; scripts/build_cpu_tier.mjs). Every worker of the pool (pool.js) instantiates this module on the same shared
;; memory; pointers are byte offsets into it.
;;
;; The math is the GPU kernels' (shaders/moe_gate_up.wgsl, moe_down_combine.wgsl) for each weight type:
;;   Q8_0 weights: the input is quantised per 32 values as ggml's quantize_row_q8_0 does (shaders/q8_block.wgsl:
;;     amax, d = f16(amax / 127), q = round-half-even(x * 127 / amax) in f32) and a row is
;;     sum over blocks of (d_w * d_x) * sum(q_w * q_x), int8 products summed exactly, f32 between blocks;
;;   Q4_0 weights: the same with the weight codes of a block being its 32 nibbles less 8 (ggml's order: the low
;;     nibbles of its 16 bytes are values 0-15, the high ones 16-31; shaders/moe/moe_pool_dot_q4.wgsl);
;;   F32 weights: a plain f32 dot product with the f32 input.
;; Weights are the store's record planes (py_engine/store/layout.py): Q8_0 codes row-major, 32 bytes per block (Q4_0:
;; 16 bytes of nibbles), and their f16 scales, 2 bytes per block; F32 rows as they are.
;; The activation between the products is SwiGLU (qwen3moe, qwen35moe) or GEGLU with the tanh-form GELU (gemma4).
;; Activation codes are kept widened to i16 (64 bytes per block), since every row reuses them; weight codes are widened
;; as they are loaded (v128.load8x8_s); i32x4.dot_i16x8_s then sums their products in pairs, exactly.
;; Measured (lab/cpu_tier_bench.mjs, one worker, 2048 x 512 records, an AMD EPYC VM): ~6.5 GB/s of records per core
;; from memory and ~8.4 from cache, against ~2.5 when each block's scale was converted and applied on its own.
;; Q4_0 (--q4, 2048 x 512 records, on a 2-core VM shared with other work): ~4.3 GB/s of records per core, ~2,400
;; experts/s against Q8_0's ~2,150 there (half the bytes, more work per byte to unpack the nibbles).
(module
  (import "env" "memory" (memory 1 65536 shared))
  ;; silu's and gelu's exp: WebAssembly has none; one call per row is nothing beside the row's product
  (import "env" "exp" (func $exp (param f64) (result f64)))

  ;; $d rounded to the nearest f16 (ties to even), as f32: shaders/round_f16.wgsl, for 0 <= d far below the f16 max.
  (func $round_f16 (param $d f32) (result f32)
    (local $b i32)
    local.get $d
    f32.const 6.103515625e-05
    f32.lt
    if (result f32)
      local.get $d
      f32.const 16777216
      f32.mul
      f32.nearest
      f32.const 16777216
      f32.div
    else
      local.get $d
      i32.reinterpret_f32
      local.tee $b
      i32.const 0xfff
      i32.add
      local.get $b
      i32.const 13
      i32.shr_u
      i32.const 1
      i32.and
      i32.add
      i32.const 0xffffe000
      i32.and
      f32.reinterpret_i32
    end)

  ;; Four f32 from $v scaled by $inv, rounded half-even to i32 lanes.
  (func $codes4 (param $v v128) (param $inv v128) (result v128)
    local.get $v
    local.get $inv
    f32x4.mul
    f32x4.nearest
    i32x4.trunc_sat_f32x4_s)

  ;; Quantise $n f32 at $x (n a multiple of 32) to Q8_0 blocks: codes widened to i16 at $codes (64 bytes per block),
  ;; the f16-rounded scales as f32 at $scales.
  (func (export "quantize_q8") (param $x i32) (param $n i32) (param $codes i32) (param $scales i32)
    (local $end i32) (local $amax v128) (local $a f32) (local $inv v128)
    local.get $x
    local.get $n
    i32.const 4
    i32.mul
    i32.add
    local.set $end
    block $done
      local.get $n
      i32.eqz
      br_if $done
      loop $block
        ;; amax over the 32 values: lane-wise max of |v|, then across the lanes
        local.get $x
        v128.load
        f32x4.abs
        local.get $x
        v128.load offset=16
        f32x4.abs
        f32x4.max
        local.get $x
        v128.load offset=32
        f32x4.abs
        local.get $x
        v128.load offset=48
        f32x4.abs
        f32x4.max
        f32x4.max
        local.get $x
        v128.load offset=64
        f32x4.abs
        local.get $x
        v128.load offset=80
        f32x4.abs
        f32x4.max
        local.get $x
        v128.load offset=96
        f32x4.abs
        local.get $x
        v128.load offset=112
        f32x4.abs
        f32x4.max
        f32x4.max
        f32x4.max
        local.tee $amax
        f32x4.extract_lane 0
        local.get $amax
        f32x4.extract_lane 1
        f32.max
        local.get $amax
        f32x4.extract_lane 2
        local.get $amax
        f32x4.extract_lane 3
        f32.max
        f32.max
        local.set $a
        ;; inv = 127 / amax, or 0 for an all-zero block
        f32.const 127
        local.get $a
        f32.div
        f32.const 0
        local.get $a
        f32.const 0
        f32.gt
        select
        f32x4.splat
        local.set $inv
        ;; the codes, 8 per i16x8
        local.get $codes
        local.get $x
        v128.load
        local.get $inv
        call $codes4
        local.get $x
        v128.load offset=16
        local.get $inv
        call $codes4
        i16x8.narrow_i32x4_s
        v128.store
        local.get $codes
        local.get $x
        v128.load offset=32
        local.get $inv
        call $codes4
        local.get $x
        v128.load offset=48
        local.get $inv
        call $codes4
        i16x8.narrow_i32x4_s
        v128.store offset=16
        local.get $codes
        local.get $x
        v128.load offset=64
        local.get $inv
        call $codes4
        local.get $x
        v128.load offset=80
        local.get $inv
        call $codes4
        i16x8.narrow_i32x4_s
        v128.store offset=32
        local.get $codes
        local.get $x
        v128.load offset=96
        local.get $inv
        call $codes4
        local.get $x
        v128.load offset=112
        local.get $inv
        call $codes4
        i16x8.narrow_i32x4_s
        v128.store offset=48
        ;; d = f16(amax / 127)
        local.get $scales
        local.get $a
        f32.const 127
        f32.div
        call $round_f16
        f32.store
        local.get $codes
        i32.const 64
        i32.add
        local.set $codes
        local.get $scales
        i32.const 4
        i32.add
        local.set $scales
        local.get $x
        i32.const 128
        i32.add
        local.tee $x
        local.get $end
        i32.lt_u
        br_if $block
      end
    end)

  ;; Four f16 scales at $p (8 bytes) as f32x4: the f16 bits moved into f32 position and scaled by 2^112 (exact for
  ;; normal and subnormal values; scales are never inf or NaN).
  (func $f16x4 (param $p i32) (result v128)
    (local $h v128)
    local.get $p
    v128.load64_zero
    i32x4.extend_low_i16x8_u
    local.tee $h
    v128.const i32x4 0x7fff 0x7fff 0x7fff 0x7fff
    v128.and
    i32.const 13
    i32x4.shl
    local.get $h
    v128.const i32x4 0x8000 0x8000 0x8000 0x8000
    v128.and
    i32.const 16
    i32x4.shl
    v128.or
    v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112
    f32x4.mul)

  ;; The sum of the four lanes: (l0 + l1) + (l2 + l3).
  (func $hsum (param $v v128) (result f32)
    local.get $v
    f32x4.extract_lane 0
    local.get $v
    f32x4.extract_lane 1
    f32.add
    local.get $v
    f32x4.extract_lane 2
    local.get $v
    f32x4.extract_lane 3
    f32.add
    f32.add)

  ;; Rows [$r0, $r1) of a Q8_0 matrix of $nb blocks per row (codes at $codes, f16 scales at $scales) times the
  ;; quantised input ($xq codes, $xs scales): out[r] (f32 at $out + 4r).
  ;; Two rows at a time share the loop and the input's scale loads. Blocks go in groups of four: the group's scale products
  ;; d_w · d_x are made at once (f32x4), and each block's int8 sum (four i32 lanes) is scaled by its lane of them
  ;; (a swizzle) into the row's f32x4 accumulator. The last group of a row may be short: its scale loads then read
  ;; past the row, harmlessly (pool.js leaves slack after the last record), and the lanes read are never used.
  (func (export "rows_q8") (param $codes i32) (param $scales i32) (param $nb i32) (param $r0 i32) (param $r1 i32)
                           (param $xq i32) (param $xs i32) (param $out i32)
    (local $w0 i32) (local $w1 i32) (local $s0 i32) (local $s1 i32) (local $q i32) (local $qs i32) (local $b i32)
    (local $in_group i32) (local $two i32)
    (local $acc0 v128) (local $acc1 v128) (local $sc0 v128) (local $sc1 v128) (local $dx v128) (local $lane v128)
    block $rows_done
      loop $rows
        local.get $r0
        local.get $r1
        i32.ge_u
        br_if $rows_done
        ;; row r0 and r0 + 1; when r0 is the last row, the second is r0 again (computed, not stored)
        local.get $codes
        local.get $r0
        local.get $nb
        i32.mul
        local.tee $b
        i32.const 32
        i32.mul
        i32.add
        local.set $w0
        local.get $scales
        local.get $b
        i32.const 2
        i32.mul
        i32.add
        local.set $s0
        local.get $r0
        i32.const 1
        i32.add
        local.get $r1
        i32.lt_u
        local.set $two
        local.get $w0
        local.get $nb
        i32.const 32
        i32.mul
        local.get $two
        i32.mul
        i32.add
        local.set $w1
        local.get $s0
        local.get $nb
        i32.const 2
        i32.mul
        local.get $two
        i32.mul
        i32.add
        local.set $s1
        local.get $xq
        local.set $q
        local.get $xs
        local.set $qs
        v128.const i32x4 0 0 0 0
        local.tee $acc0
        local.set $acc1
        i32.const 0
        local.set $b
        loop $groups
          ;; the group's d_w · d_x, for both rows
          local.get $qs
          v128.load
          local.tee $dx
          local.get $s0
          call $f16x4
          f32x4.mul
          local.set $sc0
          local.get $dx
          local.get $s1
          call $f16x4
          f32x4.mul
          local.set $sc1
          ;; the bytes of lane 0, repeated: the swizzle that spreads the current block's scale
          v128.const i8x16 0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3
          local.set $lane
          local.get $nb
          local.get $b
          i32.sub
          local.tee $in_group
          i32.const 4
          i32.gt_u
          if
            i32.const 4
            local.set $in_group
          end
          local.get $b
          local.get $in_group
          i32.add
          local.set $b
          loop $blocks
            ;; row 0: Σ q_w·q_x as four i32 lanes, to f32, times the block's d_w·d_x
            local.get $acc0
            local.get $w0
            v128.load8x8_s
            local.get $q
            v128.load
            i32x4.dot_i16x8_s
            local.get $w0
            v128.load8x8_s offset=8
            local.get $q
            v128.load offset=16
            i32x4.dot_i16x8_s
            i32x4.add
            local.get $w0
            v128.load8x8_s offset=16
            local.get $q
            v128.load offset=32
            i32x4.dot_i16x8_s
            local.get $w0
            v128.load8x8_s offset=24
            local.get $q
            v128.load offset=48
            i32x4.dot_i16x8_s
            i32x4.add
            i32x4.add
            f32x4.convert_i32x4_s
            local.get $sc0
            local.get $lane
            i8x16.swizzle
            f32x4.mul
            f32x4.add
            local.set $acc0
            ;; row 1, the same
            local.get $acc1
            local.get $w1
            v128.load8x8_s
            local.get $q
            v128.load
            i32x4.dot_i16x8_s
            local.get $w1
            v128.load8x8_s offset=8
            local.get $q
            v128.load offset=16
            i32x4.dot_i16x8_s
            i32x4.add
            local.get $w1
            v128.load8x8_s offset=16
            local.get $q
            v128.load offset=32
            i32x4.dot_i16x8_s
            local.get $w1
            v128.load8x8_s offset=24
            local.get $q
            v128.load offset=48
            i32x4.dot_i16x8_s
            i32x4.add
            i32x4.add
            f32x4.convert_i32x4_s
            local.get $sc1
            local.get $lane
            i8x16.swizzle
            f32x4.mul
            f32x4.add
            local.set $acc1
            ;; next block
            local.get $lane
            v128.const i8x16 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4
            i8x16.add
            local.set $lane
            local.get $w0
            i32.const 32
            i32.add
            local.set $w0
            local.get $w1
            i32.const 32
            i32.add
            local.set $w1
            local.get $q
            i32.const 64
            i32.add
            local.set $q
            local.get $in_group
            i32.const 1
            i32.sub
            local.tee $in_group
            br_if $blocks
          end
          local.get $s0
          i32.const 8
          i32.add
          local.set $s0
          local.get $s1
          i32.const 8
          i32.add
          local.set $s1
          local.get $qs
          i32.const 16
          i32.add
          local.set $qs
          local.get $b
          local.get $nb
          i32.lt_u
          br_if $groups
        end
        local.get $out
        local.get $r0
        i32.const 4
        i32.mul
        i32.add
        local.get $acc0
        call $hsum
        f32.store
        local.get $two
        if
          local.get $out
          local.get $r0
          i32.const 4
          i32.mul
          i32.add
          local.get $acc1
          call $hsum
          f32.store offset=4
        end
        local.get $r0
        i32.const 2
        i32.add
        local.set $r0
        br $rows
      end
    end)

  ;; Rows [$r0, $r1) of a Q4_0 matrix of $nb blocks per row (nibbles at $codes, 16 bytes per block; f16 scales at
  ;; $scales) times the quantised input ($xq codes, $xs scales): out[r]. rows_q8's loop (two rows at a time, blocks in
  ;; groups of four sharing their scale products) with Q4_0 blocks: a block's low nibbles are values 0-15, its high
  ;; nibbles 16-31, each less 8, widened to i16 for i32x4.dot_i16x8_s with the input's codes. The block's unpacking
  ;; is written out for each row: as a function call per block it ran ~1.6x slower (lab/cpu_tier_bench.mjs --q4).
  (func (export "rows_q4") (param $codes i32) (param $scales i32) (param $nb i32) (param $r0 i32) (param $r1 i32)
                           (param $xq i32) (param $xs i32) (param $out i32)
            (local $w0 i32) (local $w1 i32) (local $s0 i32) (local $s1 i32) (local $q i32) (local $qs i32) (local $b i32)
            (local $in_group i32) (local $two i32) (local $c v128) (local $lo v128) (local $hi v128)
            (local $acc0 v128) (local $acc1 v128) (local $sc0 v128) (local $sc1 v128) (local $dx v128) (local $lane v128)
            block $rows_done
      loop $rows
        local.get $r0
        local.get $r1
        i32.ge_u
        br_if $rows_done
        local.get $codes
        local.get $r0
        local.get $nb
        i32.mul
        local.tee $b
        i32.const 16
        i32.mul
        i32.add
        local.set $w0
        local.get $scales
        local.get $b
        i32.const 2
        i32.mul
        i32.add
        local.set $s0
        local.get $r0
        i32.const 1
        i32.add
        local.get $r1
        i32.lt_u
        local.set $two
        local.get $w0
        local.get $nb
        i32.const 16
        i32.mul
        local.get $two
        i32.mul
        i32.add
        local.set $w1
        local.get $s0
        local.get $nb
        i32.const 2
        i32.mul
        local.get $two
        i32.mul
        i32.add
        local.set $s1
        local.get $xq
        local.set $q
        local.get $xs
        local.set $qs
        v128.const i32x4 0 0 0 0
        local.tee $acc0
        local.set $acc1
        i32.const 0
        local.set $b
        loop $groups
          local.get $qs
          v128.load
          local.tee $dx
          local.get $s0
          call $f16x4
          f32x4.mul
          local.set $sc0
          local.get $dx
          local.get $s1
          call $f16x4
          f32x4.mul
          local.set $sc1
          v128.const i8x16 0 1 2 3 0 1 2 3 0 1 2 3 0 1 2 3
          local.set $lane
          local.get $nb
          local.get $b
          i32.sub
          local.tee $in_group
          i32.const 4
          i32.gt_u
          if
            i32.const 4
            local.set $in_group
          end
          local.get $b
          local.get $in_group
          i32.add
          local.set $b
          loop $blocks
            ;; row 0: the block's nibbles less 8 (lo: values 0-15, hi: 16-31), Σ q_w·q_x as four i32 lanes, to
            ;; f32, times the block's d_w·d_x
            local.get $acc0
            local.get $w0
            v128.load
            local.tee $c
            v128.const i8x16 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15
            v128.and
            v128.const i8x16 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8
            i8x16.sub
            local.set $lo
            local.get $c
            i32.const 4
            i8x16.shr_u
            v128.const i8x16 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8
            i8x16.sub
            local.set $hi
            local.get $lo
            i16x8.extend_low_i8x16_s
            local.get $q
            v128.load
            i32x4.dot_i16x8_s
            local.get $lo
            i16x8.extend_high_i8x16_s
            local.get $q
            v128.load offset=16
            i32x4.dot_i16x8_s
            i32x4.add
            local.get $hi
            i16x8.extend_low_i8x16_s
            local.get $q
            v128.load offset=32
            i32x4.dot_i16x8_s
            local.get $hi
            i16x8.extend_high_i8x16_s
            local.get $q
            v128.load offset=48
            i32x4.dot_i16x8_s
            i32x4.add
            i32x4.add
            f32x4.convert_i32x4_s
            local.get $sc0
            local.get $lane
            i8x16.swizzle
            f32x4.mul
            f32x4.add
            local.set $acc0
            ;; row 1, the same
            local.get $acc1
            local.get $w1
            v128.load
            local.tee $c
            v128.const i8x16 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15
            v128.and
            v128.const i8x16 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8
            i8x16.sub
            local.set $lo
            local.get $c
            i32.const 4
            i8x16.shr_u
            v128.const i8x16 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8 8
            i8x16.sub
            local.set $hi
            local.get $lo
            i16x8.extend_low_i8x16_s
            local.get $q
            v128.load
            i32x4.dot_i16x8_s
            local.get $lo
            i16x8.extend_high_i8x16_s
            local.get $q
            v128.load offset=16
            i32x4.dot_i16x8_s
            i32x4.add
            local.get $hi
            i16x8.extend_low_i8x16_s
            local.get $q
            v128.load offset=32
            i32x4.dot_i16x8_s
            local.get $hi
            i16x8.extend_high_i8x16_s
            local.get $q
            v128.load offset=48
            i32x4.dot_i16x8_s
            i32x4.add
            i32x4.add
            f32x4.convert_i32x4_s
            local.get $sc1
            local.get $lane
            i8x16.swizzle
            f32x4.mul
            f32x4.add
            local.set $acc1
            local.get $lane
            v128.const i8x16 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4 4
            i8x16.add
            local.set $lane
            local.get $w0
            i32.const 16
            i32.add
            local.set $w0
            local.get $w1
            i32.const 16
            i32.add
            local.set $w1
            local.get $q
            i32.const 64
            i32.add
            local.set $q
            local.get $in_group
            i32.const 1
            i32.sub
            local.tee $in_group
            br_if $blocks
          end
          local.get $s0
          i32.const 8
          i32.add
          local.set $s0
          local.get $s1
          i32.const 8
          i32.add
          local.set $s1
          local.get $qs
          i32.const 16
          i32.add
          local.set $qs
          local.get $b
          local.get $nb
          i32.lt_u
          br_if $groups
        end
        local.get $out
        local.get $r0
        i32.const 4
        i32.mul
        i32.add
        local.get $acc0
        call $hsum
        f32.store
        local.get $two
        if
          local.get $out
          local.get $r0
          i32.const 4
          i32.mul
          i32.add
          local.get $acc1
          call $hsum
          f32.store offset=4
        end
        local.get $r0
        i32.const 2
        i32.add
        local.set $r0
        br $rows
      end
            end)

  ;; Rows [$r0, $r1) of an F32 matrix of $n columns (n a multiple of 8) at $w times the f32 input at $x: out[r].
  (func (export "rows_f32") (param $w i32) (param $n i32) (param $r0 i32) (param $r1 i32) (param $x i32)
                            (param $out i32)
    (local $p i32) (local $q i32) (local $end i32) (local $acc0 v128) (local $acc1 v128)
    block $rows_done
      loop $rows
        local.get $r0
        local.get $r1
        i32.ge_u
        br_if $rows_done
        local.get $w
        local.get $r0
        local.get $n
        i32.mul
        i32.const 4
        i32.mul
        i32.add
        local.tee $p
        local.get $n
        i32.const 4
        i32.mul
        i32.add
        local.set $end
        local.get $x
        local.set $q
        v128.const i32x4 0 0 0 0
        local.tee $acc0
        local.set $acc1
        loop $cols
          local.get $acc0
          local.get $p
          v128.load
          local.get $q
          v128.load
          f32x4.mul
          f32x4.add
          local.set $acc0
          local.get $acc1
          local.get $p
          v128.load offset=16
          local.get $q
          v128.load offset=16
          f32x4.mul
          f32x4.add
          local.set $acc1
          local.get $q
          i32.const 32
          i32.add
          local.set $q
          local.get $p
          i32.const 32
          i32.add
          local.tee $p
          local.get $end
          i32.lt_u
          br_if $cols
        end
        local.get $out
        local.get $r0
        i32.const 4
        i32.mul
        i32.add
        local.get $acc0
        local.get $acc1
        f32x4.add
        call $hsum
        f32.store
        local.get $r0
        i32.const 1
        i32.add
        local.set $r0
        br $rows
      end
    end)

  ;; act[i] = silu(g[i]) * u[i] for $n values (shaders/silu_times.wgsl: g / (1 + e^-g) * u).
  (func (export "swiglu") (param $g i32) (param $u i32) (param $act i32) (param $n i32)
    (local $v f32)
    block $done
      local.get $n
      i32.eqz
      br_if $done
      loop $each
        local.get $act
        local.get $g
        f32.load
        local.tee $v
        f32.const 1
        local.get $v
        f32.neg
        f64.promote_f32
        call $exp
        f32.demote_f64
        f32.add
        f32.div
        local.get $u
        f32.load
        f32.mul
        f32.store
        local.get $g
        i32.const 4
        i32.add
        local.set $g
        local.get $u
        i32.const 4
        i32.add
        local.set $u
        local.get $act
        i32.const 4
        i32.add
        local.set $act
        local.get $n
        i32.const 1
        i32.sub
        local.tee $n
        br_if $each
      end
    end)

  ;; act[i] = gelu(g[i]) * u[i] for $n values, GELU the tanh form in f32 as shaders/common/gelu_mul.wgsl computes it:
  ;; z = clamp(sqrt(2/pi) g (1 + 0.044715 g^2), -15, 15) in f32 (the same operations in the same order), then
  ;; tanh(z) = 1 - 2 / (e^(2z) + 1) in f64 (an absolute error of a few 1e-16, far below half an f32 ulp, so the f32
  ;; tanh is the correctly rounded one except at the rarest ties), then 0.5 g (1 + tanh z) u in f32.
  (func (export "geglu") (param $g i32) (param $u i32) (param $act i32) (param $n i32)
    (local $v f32) (local $z f32)
    block $done
      local.get $n
      i32.eqz
      br_if $done
      loop $each
        local.get $g
        f32.load
        local.set $v
        ;; (sqrt(2/pi) g) (1 + (0.044715 g) g), clamped
        f32.const 0x1.988454p-1
        local.get $v
        f32.mul
        f32.const 1
        f32.const 0.044715
        local.get $v
        f32.mul
        local.get $v
        f32.mul
        f32.add
        f32.mul
        f32.const -15
        f32.max
        f32.const 15
        f32.min
        local.set $z
        local.get $act
        ;; (0.5 g) (1 + tanh z) u
        f32.const 0.5
        local.get $v
        f32.mul
        f32.const 1
        f64.const 1
        f64.const 2
        local.get $z
        f64.promote_f32
        f64.const 2
        f64.mul
        call $exp
        f64.const 1
        f64.add
        f64.div
        f64.sub
        f32.demote_f64
        f32.add
        f32.mul
        local.get $u
        f32.load
        f32.mul
        f32.store
        local.get $g
        i32.const 4
        i32.add
        local.set $g
        local.get $u
        i32.const 4
        i32.add
        local.set $u
        local.get $act
        i32.const 4
        i32.add
        local.set $act
        local.get $n
        i32.const 1
        i32.sub
        local.tee $n
        br_if $each
      end
    end)
)
