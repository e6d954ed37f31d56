// The hang of tests/programs/upstream_int_range_hang_wide.mlir reduced by hand
// to one function: a loop-carried i32 that the inner loop passes through.
// mlir-opt-22 --int-range-optimizations ratchets the range of %k0 by one per
// solver visit ([1,1], [1,2], [1,3], ...) with no widening: 2^31 steps on i32.
func.func @f() -> i32 {
  %v1 = arith.constant 1 : i32
  %s0 = arith.constant 1 : index
  %v2 = scf.for %i0 = %s0 to %s0 step %s0 iter_args(%k0 = %v1) -> (i32) {
    %v4 = arith.addi %v1, %k0 : i32
    %v9 = scf.for %i1 = %s0 to %s0 step %s0 iter_args(%k1 = %v4) -> (i32) {
      scf.yield %k1 : i32
    }
    scf.yield %v9 : i32
  }
  return %v2 : i32
}
