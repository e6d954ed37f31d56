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
    %r0 = "loom.spatial_region"(%mem) <{operandSegmentSizes = array<i32: 0, 0, 1, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
      ^bb0(%m0: memref<4xi32>):
        %v0 = arith.constant 0 : i32
        %c0 = arith.cmpi ne, %v0, %v0 : i32
        %v1 = scf.if %c0 -> (i32) {
          %v3 = arith.constant 7 : i32
          %v4 = arith.andi %v0, %v3 : i32
          %n0 = arith.index_cast %v4 : i32 to index
          %x0 = arith.constant 0 : index
          %s0 = arith.constant 1 : index
          %v2 = scf.for %i0 = %x0 to %n0 step %s0 iter_args(%k0 = %v4) -> (i32) {
            %v5 = func.call @helper_double(%k0) : (i32) -> i32
            scf.yield %v5 : i32
          }
          scf.yield %v2 : i32
        } else {
          scf.yield %v0 : i32
        }
        "loom.spatial_yield"(%v1) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
    }, {
    }) {graph_name = "graph_0", source_maps = []} : (memref<4xi32>) -> i32
  }
  "dataflow.thread.yield"() : () -> ()
}, {
}) {sym_name = "thread_0", sym_visibility = "private", domain = #dataflow.thread_domain<dense>} : () -> ()

}
