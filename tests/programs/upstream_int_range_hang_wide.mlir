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
"dataflow.thread"() ({
^bb0(%mem: memref<4xi32>, %val: i32, %flag: i1, %start: none):
  %lo = arith.constant 0 : index
  %hi = arith.constant 2 : index
  %stp = arith.constant 1 : index
  scf.if %flag {
    %r0 = "loom.spatial_region"(%flag) <{operandSegmentSizes = array<i32: 1, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
      ^bb0(%c0: i1):
        %v0 = arith.constant 0 : i32
        %v1 = arith.constant 1 : i32
        %x0 = arith.constant 0 : index
        %s0 = arith.constant 1 : index
        %v2 = scf.for %i0 = %s0 to %s0 step %s0 iter_args(%k0 = %v1) -> (i32) {
          %v3 = arith.constant 0 : i32
          %v4 = arith.addi %v1, %k0 : i32
          %v5 = arith.constant 0 : i32
          %v6 = arith.constant 0 : i32
          %v7 = arith.constant 0 : i32
          %v8 = arith.constant 0 : i32
          %x1 = arith.constant 0 : index
          %s1 = arith.constant 1 : index
          %v9 = scf.for %i1 = %s1 to %s1 step %s1 iter_args(%k1 = %v4) -> (i32) {
            scf.yield %k1 : i32
          }
          %v10 = arith.constant 0 : i32
          %v11 = arith.constant 0 : i32
          scf.yield %v9 : i32
        }
        "loom.spatial_yield"(%v2) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
    }, {
    }) {graph_name = "graph_0", source_maps = []} : (i1) -> i32
  }
  "dataflow.thread.yield"() : () -> ()
}, {
}) {sym_name = "thread_0", sym_visibility = "private", domain = #dataflow.thread_domain<dense>} : () -> ()

}
