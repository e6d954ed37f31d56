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
    %r0:2 = "loom.spatial_region"(%val) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 2, 0>}> ({
      ^bb0(%a0: i32):
        %v0 = arith.constant 255 : i32
        %v1 = arith.andi %a0, %v0 : i32
        %v2 = arith.andi %a0, %v0 : i32
        %v3 = arith.muli %v1, %v2 overflow<nsw> : i32
        "loom.spatial_yield"(%a0, %v3) <{operandSegmentSizes = array<i32: 2, 0>}> : (i32, i32) -> ()
    }) {graph_name = "graph_0", source_maps = []} : (i32) -> (i32, i32)
  }
  %r1 = "loom.spatial_region"(%flag) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
    ^bb0(%c0: i1):
      %v0 = arith.constant 3 : i32
      %v1 = arith.constant 255 : i32
      %v2 = arith.andi %v0, %v1 : i32
      %v3 = arith.andi %v0, %v1 : i32
      %v4 = arith.muli %v2, %v3 overflow<nsw> : i32
      %c1 = arith.cmpi uge, %v4, %v4 : i32
      %v6 = arith.constant 7 : i32
      %v7 = arith.andi %v4, %v6 : i32
      %n0 = arith.index_cast %v7 : i32 to index
      %x0 = arith.constant 0 : index
      %s0 = arith.constant 2 : index
      %v5 = scf.for %i0 = %x0 to %n0 step %s0 iter_args(%k0 = %v4) -> (i32) {
        %v8 = arith.subi %v6, %v7 : i32
        %v9 = arith.constant 2147483647 : i32
        %v10 = arith.andi %v6, %v9 : i32
        %v11 = arith.constant 1 : i32
        %v12 = arith.ori %v10, %v11 : i32
        %v13 = arith.remui %v4, %v12 : i32
        %v14 = arith.subi %v12, %v8 : i32
        %v15 = arith.constant 2147483647 : i32
        %v16 = arith.andi %v14, %v15 : i32
        %v17 = arith.constant 1 : i32
        %v18 = arith.ori %v16, %v17 : i32
        %v19 = arith.remui %v13, %v18 : i32
        %x1 = arith.constant 2 : index
        %s1 = arith.constant 3 : index
        %v20 = scf.for %i1 = %s0 to %s0 step %s1 iter_args(%k1 = %v15) -> (i32) {
          %v21 = arith.maxsi %v19, %v18 : i32
          scf.yield %v18 : i32
        }
        %c2 = arith.cmpi ule, %v16, %v16 : i32
        %v22 = scf.if %c1 -> (i32) {
          scf.yield %v18 : i32
        } else {
          %v23 = arith.addi %v15, %v15 : i32
          %v24 = arith.select %c2, %v19, %v16 : i32
          %v25 = arith.constant -2147483648 : i32
          scf.yield %v20 : i32
        }
        %v26 = arith.andi %v17, %v22 : i32
        scf.yield %v19 : i32
      }
      %v27 = arith.xori %v5, %v0 : i32
      %v28 = arith.constant 1 : i32
      %v29 = arith.ori %v5, %v28 : i32
      %v30 = arith.divui %v5, %v29 : i32
      %v31 = arith.select %c0, %v27, %v30 : i32
      "loom.spatial_yield"(%v5) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
  }) {graph_name = "graph_1", source_maps = []} : (i1) -> i32
  dataflow.thread.yield
}

}
