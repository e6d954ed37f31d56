module {
func.func @helper_double(%a: i32) -> i32 {
  %doubled = arith.addi %a, %a : i32
  return %doubled : i32
}
llvm.func @extern_scale(i32) -> i32
func.func @host_container(%target: memref<4xi32>, %value: i32) {
  %zero = arith.constant 0 : index
  %four = arith.constant 4 : index
  %one = arith.constant 1 : index
  scf.for %hi = %zero to %four step %one {
    memref.store %value, %target[%hi] : memref<4xi32>
  }
  return
}
dataflow.thread private @thread_0 domain(#dataflow.thread_domain<dense>)(%mem: memref<4xi32>, %val: i32, %flag: i1) ctrl (%start: none) {
  %lo = arith.constant 0 : index
  %hi = arith.constant 2 : index
  %stp = arith.constant 1 : index
  %r0:2 = "loom.spatial_region"(%val, %mem) <{operandSegmentSizes = array<i32: 1, 0, 1, 0>, resultSegmentSizes = array<i32: 2, 0>}> ({
    ^bb0(%a0: i32, %m0: memref<4xi32>):
      %v0 = arith.constant 32767 : i32
      %v1 = arith.andi %a0, %v0 : i32
      %v2 = arith.andi %a0, %v0 : i32
      %v3 = arith.addi %v1, %v2 overflow<nsw> : i32
      "loom.spatial_yield"(%v3, %v3) <{operandSegmentSizes = array<i32: 2, 0>}> : (i32, i32) -> ()
  }) {graph_name = "graph_0", source_maps = []} : (i32, memref<4xi32>) -> (i32, i32)
  dataflow.thread.yield
}

}
