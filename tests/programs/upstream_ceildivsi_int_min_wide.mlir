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
  scf.if %flag {
    %r0 = "loom.spatial_region"(%val, %flag) <{operandSegmentSizes = array<i32: 2, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
      ^bb0(%a0: i32, %c0: i1):
        %v0 = arith.constant 0 : i32
        %v1 = arith.constant 1 : i32
        %v2 = arith.divsi %v0, %v1 : i32
        %v3 = arith.constant 2 : i32
        %v4 = arith.constant 7 : i32
        %v5 = arith.andi %v3, %v4 : i32
        %v6 = arith.constant 1 : i32
        %v7 = arith.ori %v5, %v6 : i32
        %v8 = arith.ceildivsi %a0, %v7 : i32
        "loom.spatial_yield"(%v8) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
    }) {graph_name = "graph_0", source_maps = []} : (i32, i1) -> i32
  }
  dataflow.thread.yield
}

}
