// loomfuzz-interp-ir: the IR executor's compiled form (internal to loomfuzz-interp*.cpp).
//
// A module is compiled once (loomfuzz-interp-compile.cpp) into flat
// instructions whose operands are slot numbers of a function's frame, then
// run (loomfuzz-interp.cpp): no map lookups while running.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"

#include "llvm/ADT/APInt.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace loomfuzz::interp {

using llvm::APInt;

enum class K : uint8_t {
  Unknown,
  // constants
  Const, Poison,
  // binary integer ops: arith, index, llvm
  Add, Sub, Mul, And, Or, Xor, Shl, ShrS, ShrU, DivS, DivU, RemS, RemU, CeilDivS, CeilDivU,
  FloorDivS, MaxS, MaxU, MinS, MinU, Cmp,
  // other integer ops
  Select, ExtS, ExtU, Trunc, CastS, CastU, Bitcast, Freeze, AddUIExtended, MulSIExtended,
  MulUIExtended, AbsI, Ctlz, Cttz, Ctpop, IPowI,
  // calls and terminators
  Call, Return, Yield, Condition, Br, CondBr, Switch,
  // structured control flow
  For, If, While, ExecuteRegion, IndexSwitch,
  // memory
  Alloc, Dealloc, Load, Store, GetGlobal, MemCast, Dim, Copy,
};

enum Flag : uint8_t { NSW = 1, NUW = 2, EXACT = 4, DISJOINT = 8, NNEG = 16, UNSIGNED_CMP = 32 };
enum Pred : uint8_t { EQ, NE, SLT, SLE, SGT, SGE, ULT, ULE, UGT, UGE };

struct Val {
  APInt v;
  int32_t mem = -1; // a memref: its buffer
  bool poison = false;
};

struct Succ {
  int block = 0;
  llvm::SmallVector<uint32_t, 4> args;
};

struct Inst {
  K kind = K::Unknown;
  uint8_t flags = 0;
  uint8_t pred = 0;
  unsigned bits = 0; // width of the (first) result
  int32_t ref = -1;  // callee function or global
  llvm::SmallVector<uint32_t, 4> in;
  llvm::SmallVector<uint32_t, 2> out;
  llvm::SmallVector<int32_t, 2> regions;
  llvm::SmallVector<Succ, 2> succs;
  llvm::SmallVector<int64_t, 2> shape; // alloc: the static shape (-1: an operand's)
  llvm::SmallVector<int64_t, 2> cases; // switch, index_switch
  APInt imm;
  mlir::Operation *op = nullptr;
  std::string unknown; // K::Unknown: what is not known
};

struct Block {
  llvm::SmallVector<uint32_t, 4> args;
  std::vector<Inst> insts;
};

struct Region {
  std::vector<Block> blocks;
};

enum class Ext : uint8_t { Defined, PrintI64, PrintComma, PrintNewline, Missing };

struct Function {
  std::string name;
  Ext ext = Ext::Missing;
  int body = -1;
  uint32_t slots = 0;
  unsigned params = 0, results = 0;
};

struct Global {
  llvm::SmallVector<int64_t, 2> shape;
  unsigned bits = 32;
  std::vector<APInt> init; // empty: uninitialized (poison cells)
  bool known = true;
  std::string why;
};

struct Buffer {
  llvm::SmallVector<int64_t, 2> shape;
  std::vector<Val> cells;
  bool freed = false;
};


struct Compiled {
  std::vector<Function> functions;
  llvm::StringMap<int> byName;
  std::vector<Region> regions;
  std::vector<Global> globals;
  llvm::StringMap<int> globalByName;
};

// Integer width of a type (index: 64), 0 for anything else.
unsigned widthOf(mlir::Type type);
// "'op.name' at loc" for messages.
std::string where(mlir::Operation *op);
// Every function and global of `module`; an operation without semantics becomes an
// instruction that stops the run as unknown when (and only when) it is reached.
void compileModule(mlir::ModuleOp module, Compiled &compiled);

} // namespace loomfuzz::interp
