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
  %r0 = "loom.spatial_region"(%flag, %val) <{operandSegmentSizes = array<i32: 2, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
    ^bb0(%c0: i1, %a0: i32):
      %v0 = arith.xori %a0, %a0 : i32
      "loom.spatial_yield"(%a0) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
  }) {graph_name = "graph_0", source_maps = []} : (i1, i32) -> i32
  dataflow.thread.yield
}

dataflow.thread private @thread_1 domain(#dataflow.thread_domain<dense>)(%mem: memref<4xi32>, %val: i32, %flag: i1) ctrl (%start: none) {
  %lo = arith.constant 0 : index
  %hi = arith.constant 2 : index
  %stp = arith.constant 1 : index
  %icall = func.call @helper_double(%val) : (i32) -> i32
  scf.for %iv = %lo to %hi step %stp {
    %r1:2 = "loom.spatial_region"(%val) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 2, 0>}> ({
      ^bb0(%a0: i32):
        %v0 = arith.constant -2147483648 : i32
        %v1 = arith.ori %a0, %v0 : i32
        %v2 = arith.remui %a0, %v1 : i32
        %v3 = arith.constant 255 : i32
        %v4 = arith.andi %v2, %v3 : i32
        %v5 = arith.andi %v1, %v3 : i32
        %v6 = arith.muli %v4, %v5 overflow<nsw> : i32
        %v7 = arith.xori %v5, %v4 : i32
        %v8 = arith.constant 256 : i32
        %v9 = arith.ori %v4, %v8 : i32
        %v10 = arith.constant 255 : i32
        %v11 = arith.andi %v6, %v10 : i32
        %v12 = arith.subi %v9, %v11 overflow<nuw> : i32
        %v13 = arith.addi %v12, %v9 : i32
        "loom.spatial_yield"(%v11, %v13) <{operandSegmentSizes = array<i32: 2, 0>}> : (i32, i32) -> ()
    }) {graph_name = "graph_1", source_maps = []} : (i32) -> (i32, i32)
  }
  "loom.spatial_region"(%val, %flag, %mem, %mem) <{operandSegmentSizes = array<i32: 2, 0, 2, 0>, resultSegmentSizes = array<i32: 0, 0>}> ({
    ^bb0(%a0: i32, %c0: i1, %m0: memref<4xi32>, %m1: memref<4xi32>):
      "loom.spatial_yield"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()
  }) {graph_name = "graph_2", source_maps = []} : (i32, i1, memref<4xi32>, memref<4xi32>) -> ()
  dataflow.thread.yield
}

dataflow.thread private @thread_2 domain(#dataflow.thread_domain<dense>)(%mem: memref<4xi32>, %val: i32, %flag: i1) ctrl (%start: none) {
  %lo = arith.constant 0 : index
  %hi = arith.constant 2 : index
  %stp = arith.constant 1 : index
  %icall = func.call @helper_double(%val) : (i32) -> i32
  scf.for %iv = %lo to %hi step %stp {
    %r3 = "loom.spatial_region"(%flag) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
      ^bb0(%c0: i1):
        %v0 = arith.constant 0 : i32
        %v1 = arith.ori %v0, %v0 : i32
        %v2 = arith.constant 2147483647 : i32
        "loom.spatial_yield"(%v1) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
    }) {graph_name = "graph_3", source_maps = []} : (i1) -> i32
  }
  dataflow.thread.yield
}

dataflow.thread private @thread_3 domain(#dataflow.thread_domain<dense>)(%mem: memref<4xi32>, %val: i32, %flag: i1) ctrl (%start: none) {
  %lo = arith.constant 0 : index
  %hi = arith.constant 2 : index
  %stp = arith.constant 1 : index
  scf.if %flag {
    %r4 = "loom.spatial_region"(%val) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
      ^bb0(%a0: i32):
        "loom.spatial_yield"(%a0) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
    }) {graph_name = "graph_4", source_maps = []} : (i32) -> i32
  }
  dataflow.thread.yield
}

dataflow.thread private @thread_4 domain(#dataflow.thread_domain<dense>)(%mem: memref<4xi32>, %val: i32, %flag: i1) ctrl (%start: none) {
  %lo = arith.constant 0 : index
  %hi = arith.constant 2 : index
  %stp = arith.constant 1 : index
  scf.for %iv = %lo to %hi step %stp {
    %r5:2 = "loom.spatial_region"(%mem) <{operandSegmentSizes = array<i32: 0, 0, 1, 0>, resultSegmentSizes = array<i32: 2, 0>}> ({
      ^bb0(%m0: memref<4xi32>):
        %v0 = arith.constant 2 : i32
        %v1 = arith.constant 255 : i32
        %v2 = arith.andi %v0, %v1 : i32
        %v3 = arith.andi %v0, %v1 : i32
        %v4 = arith.subi %v2, %v3 overflow<nsw> : i32
        %v5 = arith.addi %v1, %v3 : i32
        %v6 = arith.subi %v1, %v2 : i32
        %v7 = arith.constant 7 : i32
        %v8 = arith.andi %v4, %v7 : i32
        %v9 = arith.shrsi %v1, %v8 : i32
        %x0 = arith.constant 2 : index
        %v10 = memref.load %m0[%x0] : memref<4xi32>
        %v11 = arith.xori %v10, %v9 : i32
        %x1 = arith.constant 2 : index
        %s0 = arith.constant 2 : index
        %v12 = scf.for %i0 = %s0 to %s0 step %s0 iter_args(%k0 = %v9) -> (i32) {
          %v13 = arith.ori %k0, %v9 : i32
          %v14 = arith.muli %v9, %v8 : i32
          scf.yield %v14 : i32
        }
        %v15 = arith.ori %v7, %v7 : i32
        %x2 = arith.constant 2 : index
        memref.store %v12, %m0[%x2] : memref<4xi32>
        %c0 = arith.cmpi ne, %v9, %v11 : i32
        "loom.spatial_yield"(%v11, %v9) <{operandSegmentSizes = array<i32: 2, 0>}> : (i32, i32) -> ()
    }) {graph_name = "graph_5", source_maps = []} : (memref<4xi32>) -> (i32, i32)
  }
  %r6 = "loom.spatial_region"(%flag) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
    ^bb0(%c0: i1):
      %v0 = arith.constant 3 : i32
      %v1 = arith.select %c0, %v0, %v0 : i32
      %v2 = arith.maxui %v1, %v0 : i32
      %v3 = arith.andi %v2, %v0 : i32
      "loom.spatial_yield"(%v1) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
  }) {graph_name = "graph_6", source_maps = []} : (i1) -> i32
  "loom.spatial_region"(%mem) <{operandSegmentSizes = array<i32: 0, 0, 1, 0>, resultSegmentSizes = array<i32: 0, 0>}> ({
    ^bb0(%m0: memref<4xi32>):
      %v0 = arith.constant 1 : i32
      %v1 = arith.maxui %v0, %v0 : i32
      %v2 = arith.minui %v0, %v1 : i32
      %v3 = arith.subi %v1, %v2 overflow<nuw> : i32
      %v4 = arith.constant 2147483647 : i32
      %v5 = arith.andi %v2, %v4 : i32
      %v6 = arith.constant 1 : i32
      %v7 = arith.ori %v2, %v6 : i32
      %v8 = arith.floordivsi %v5, %v7 : i32
      "loom.spatial_yield"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()
  }) {graph_name = "graph_7", source_maps = []} : (memref<4xi32>) -> ()
  %r8 = "loom.spatial_region"(%val, %val, %mem) <{operandSegmentSizes = array<i32: 2, 0, 1, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
    ^bb0(%a0: i32, %a1: i32, %m0: memref<4xi32>):
      "loom.spatial_yield"(%a0) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
  }) {graph_name = "graph_8", source_maps = []} : (i32, i32, memref<4xi32>) -> i32
  %r9 = "loom.spatial_region"(%flag) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
    ^bb0(%c0: i1):
      %v0 = arith.constant 0 : i32
      %c1 = arith.cmpi sge, %v0, %v0 : i32
      "loom.spatial_yield"(%v0) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
  }) {graph_name = "graph_9", source_maps = []} : (i1) -> i32
  scf.for %iv = %lo to %hi step %stp {
    %r10 = "loom.spatial_region"(%mem) <{operandSegmentSizes = array<i32: 0, 0, 1, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
      ^bb0(%m0: memref<4xi32>):
        %v0 = arith.constant 3 : i32
        %v1 = arith.andi %v0, %v0 : i32
        %v2 = arith.muli %v0, %v1 : i32
        "loom.spatial_yield"(%v1) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
    }) {graph_name = "graph_10", source_maps = []} : (memref<4xi32>) -> i32
    %r11 = "loom.spatial_region"(%val, %mem, %mem) <{operandSegmentSizes = array<i32: 1, 0, 2, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
      ^bb0(%a0: i32, %m0: memref<4xi32>, %m1: memref<4xi32>):
        %x0 = arith.constant 2 : index
        %s0 = arith.constant 3 : index
        %v0 = scf.for %i0 = %s0 to %x0 step %s0 iter_args(%k0 = %a0) -> (i32) {
          %v1 = llvm.freeze %a0 : i32
          %v2 = arith.maxui %v1, %v1 : i32
          %x1 = arith.constant 0 : index
          %s1 = arith.constant 1 : index
          %v3 = scf.for %i1 = %x0 to %s1 step %s1 iter_args(%k1 = %v2) -> (i32) {
            %x2 = arith.constant 0 : index
            memref.store %v1, %m1[%x1] : memref<4xi32>
            scf.yield %a0 : i32
          }
          %v4 = arith.constant 31 : i32
          %v5 = arith.shli %k0, %v4 : i32
          %x3 = arith.constant 3 : index
          %s2 = arith.constant 3 : index
          %v6 = scf.for %i2 = %s2 to %s1 step %s1 iter_args(%k2 = %v3) -> (i32) {
            %v7 = arith.subi %v3, %v2 : i32
            %v8 = arith.constant 2 : i32
            %x4 = arith.constant 0 : index
            %s3 = arith.constant 3 : index
            %v9 = scf.for %i3 = %x4 to %s2 step %s1 iter_args(%k3 = %v8) -> (i32) {
              %v10 = arith.addi %v5, %v7 : i32
              scf.yield %k3 : i32
            }
            %v11 = arith.constant 1 : i32
            %v12 = arith.ori %v7, %v11 : i32
            %v13 = arith.ori %k2, %v11 : i32
            %v14 = arith.divsi %v12, %v13 : i32
            %v15 = arith.constant 1 : i32
            %v16 = arith.ori %v8, %v15 : i32
            %v17 = arith.ori %v13, %v15 : i32
            %v18 = arith.divsi %v16, %v17 : i32
            %x5 = arith.constant 0 : index
            %v19 = memref.load %m0[%s2] : memref<4xi32>
            %v20 = arith.muli %v19, %v14 : i32
            %v21 = arith.constant 42 : i32
            %v22 = arith.constant 31 : i32
            %v23 = arith.andi %v18, %v22 : i32
            %v24 = arith.shrui %v16, %v23 : i32
            %c0 = arith.cmpi sle, %v23, %v20 : i32
            %v25 = scf.if %c0 -> (i32) {
              %v26 = arith.constant 255 : i32
              %v27 = arith.andi %v20, %v26 : i32
              %v28 = arith.andi %v20, %v26 : i32
              %v29 = arith.subi %v27, %v28 overflow<nsw> : i32
              %v30 = arith.constant 7 : i32
              %v31 = arith.andi %v23, %v30 : i32
              %v32 = arith.constant 1 : i32
              %v33 = arith.ori %v31, %v32 : i32
              %v34 = arith.remui %v23, %v33 : i32
              scf.yield %v33 : i32
            } else {
              %v35 = arith.addi %v21, %v20 : i32
              %x6 = arith.constant 0 : index
              %v36 = memref.load %m1[%s3] : memref<4xi32>
              scf.yield %v22 : i32
            }
            %v37 = arith.addi %v21, %v21 : i32
            %v38 = arith.addi %v25, %v22 : i32
            %x7 = arith.constant 0 : index
            %v39 = memref.load %m1[%x7] : memref<4xi32>
            %x8 = arith.constant 0 : index
            memref.store %v23, %m1[%x8] : memref<4xi32>
            %x9 = arith.constant 1 : index
            %v40 = memref.load %m0[%x9] : memref<4xi32>
            scf.yield %v25 : i32
          }
          scf.yield %v2 : i32
        }
        "loom.spatial_yield"(%a0) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
    }) {graph_name = "graph_11", source_maps = []} : (i32, memref<4xi32>, memref<4xi32>) -> i32
    %r12 = "loom.spatial_region"(%val, %val, %flag) <{operandSegmentSizes = array<i32: 3, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
      ^bb0(%a0: i32, %a1: i32, %c0: i1):
        %v0 = arith.maxsi %a1, %a1 : i32
        "loom.spatial_yield"(%a1) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
    }) {graph_name = "graph_12", source_maps = []} : (i32, i32, i1) -> i32
  }
  dataflow.thread.yield
}

dataflow.thread private @thread_5 domain(#dataflow.thread_domain<dense>)(%mem: memref<4xi32>, %val: i32, %flag: i1) ctrl (%start: none) {
  %lo = arith.constant 0 : index
  %hi = arith.constant 2 : index
  %stp = arith.constant 1 : index
  %icall = func.call @helper_double(%val) : (i32) -> i32
  scf.if %flag {
    "loom.spatial_region"(%flag) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 0, 0>}> ({
      ^bb0(%c0: i1):
        %v0 = arith.constant 1 : i32
        "loom.spatial_yield"() <{operandSegmentSizes = array<i32: 0, 0>}> : () -> ()
    }) {graph_name = "graph_13", source_maps = []} : (i1) -> ()
  }
  scf.if %flag {
    %r14 = "loom.spatial_region"(%val, %mem) <{operandSegmentSizes = array<i32: 1, 0, 1, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
      ^bb0(%a0: i32, %m0: memref<4xi32>):
        %v0 = arith.constant 31 : i32
        %v1 = arith.andi %a0, %v0 : i32
        %v2 = arith.shrsi %a0, %v1 : i32
        %x0 = arith.constant 3 : index
        %s0 = arith.constant 2 : index
        %v3 = scf.for %i0 = %s0 to %x0 step %s0 iter_args(%k0 = %v1) -> (i32) {
          scf.yield %v0 : i32
        }
        %v4 = arith.addi %v1, %v3 : i32
        %v5 = arith.xori %a0, %a0 : i32
        %v6 = arith.addi %v2, %v1 : i32
        %v7 = arith.constant 255 : i32
        %v8 = arith.andi %v4, %v7 : i32
        %v9 = arith.andi %v2, %v7 : i32
        %v10 = arith.muli %v8, %v9 overflow<nuw> : i32
        %v11 = arith.andi %v8, %v8 : i32
        %x1 = arith.constant 3 : index
        memref.store %v9, %m0[%x1] : memref<4xi32>
        %v12 = memref.load %m0[%x1] : memref<4xi32>
        %v14 = arith.constant 1 : i32
        %v15 = arith.andi %v8, %v14 : i32
        %n0 = arith.index_cast %v15 : i32 to index
        %x2 = arith.constant 0 : index
        %s1 = arith.constant 1 : index
        %v13 = scf.for %i1 = %x2 to %n0 step %s1 iter_args(%k1 = %v11) -> (i32) {
          %v16 = arith.xori %v10, %k1 : i32
          %x3 = arith.constant 1 : index
          %v17 = memref.load %m0[%x2] : memref<4xi32>
          scf.yield %v14 : i32
        }
        %v18 = arith.xori %v12, %v9 : i32
        %v19 = arith.constant 2147483647 : i32
        "loom.spatial_yield"(%v13) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
    }) {graph_name = "graph_14", source_maps = []} : (i32, memref<4xi32>) -> i32
  }
  dataflow.thread.yield
}

}
