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
    %r0 = "loom.spatial_region"(%val, %flag) <{operandSegmentSizes = array<i32: 2, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0>}> ({
      ^bb0(%a0: i32, %c0: i1):
        %v0 = scf.if %c0 -> (i32) {
          scf.yield %a0 : i32
        } else {
          %v1 = scf.if %c0 -> (i32) {
            scf.yield %a0 : i32
          } else {
            scf.yield %a0 : i32
          }
          %v2 = scf.if %c0 -> (i32) {
            %x0 = arith.constant 0 : index
            %s0 = arith.constant 1 : index
            %v3 = scf.for %i0 = %s0 to %s0 step %s0 iter_args(%k0 = %v1) -> (i32) {
              scf.yield %k0 : i32
            }
            scf.yield %v3 : i32
          } else {
            scf.yield %v1 : i32
          }
          scf.yield %v1 : i32
        }
        "loom.spatial_yield"(%v0) <{operandSegmentSizes = array<i32: 1, 0>}> : (i32) -> ()
    }, {
    }) {graph_name = "graph_0", source_maps = []} : (i32, i1) -> i32
  }
  "dataflow.thread.yield"() : () -> ()
}, {
}) {sym_name = "thread_0", sym_visibility = "private", domain = #dataflow.thread_domain<dense>} : () -> ()

}
