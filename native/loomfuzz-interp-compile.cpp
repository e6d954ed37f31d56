// loomfuzz-interp-compile: a module into the IR executor's compiled form
// (loomfuzz-interp-ir.h): every SSA value a frame slot, every operation an
// instruction of a kind, its flags, predicate, callee or global resolved once.

#include "loomfuzz-interp-ir.h"


#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Index/IR/IndexOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/APInt.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace loomfuzz::interp {

// Integer width of a type (index: 64), 0 for anything else.
unsigned widthOf(mlir::Type type) {
  if (auto integer = llvm::dyn_cast<mlir::IntegerType>(type))
    return integer.getWidth();
  if (llvm::isa<mlir::IndexType>(type))
    return 64;
  return 0;
}

std::string where(mlir::Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "'" << op->getName().getStringRef() << "' at " << op->getLoc();
  return text;
}

namespace {

const llvm::StringMap<K> &kinds() {
  static const llvm::StringMap<K> table = [] {
    llvm::StringMap<K> t;
    auto add = [&](std::initializer_list<const char *> names, K k) {
      for (const char *n : names)
        t[n] = k;
    };
    add({"arith.constant", "llvm.mlir.constant", "index.constant", "index.bool.constant"}, K::Const);
    add({"ub.poison", "llvm.mlir.poison"}, K::Poison);
    add({"arith.addi", "index.add", "llvm.add"}, K::Add);
    add({"arith.subi", "index.sub", "llvm.sub"}, K::Sub);
    add({"arith.muli", "index.mul", "llvm.mul"}, K::Mul);
    add({"arith.andi", "index.and", "llvm.and"}, K::And);
    add({"arith.ori", "index.or", "llvm.or"}, K::Or);
    add({"arith.xori", "index.xor", "llvm.xor"}, K::Xor);
    add({"arith.shli", "index.shl", "llvm.shl"}, K::Shl);
    add({"arith.shrsi", "index.shrs", "llvm.ashr"}, K::ShrS);
    add({"arith.shrui", "index.shru", "llvm.lshr"}, K::ShrU);
    add({"arith.divsi", "index.divs", "llvm.sdiv"}, K::DivS);
    add({"arith.divui", "index.divu", "llvm.udiv"}, K::DivU);
    add({"arith.remsi", "index.rems", "llvm.srem"}, K::RemS);
    add({"arith.remui", "index.remu", "llvm.urem"}, K::RemU);
    add({"arith.ceildivsi", "index.ceildivs"}, K::CeilDivS);
    add({"arith.ceildivui", "index.ceildivu"}, K::CeilDivU);
    add({"arith.floordivsi", "index.floordivs"}, K::FloorDivS);
    add({"arith.maxsi", "index.maxs", "llvm.intr.smax"}, K::MaxS);
    add({"arith.maxui", "index.maxu", "llvm.intr.umax"}, K::MaxU);
    add({"arith.minsi", "index.mins", "llvm.intr.smin"}, K::MinS);
    add({"arith.minui", "index.minu", "llvm.intr.umin"}, K::MinU);
    add({"arith.cmpi", "index.cmp", "llvm.icmp"}, K::Cmp);
    add({"arith.select", "llvm.select"}, K::Select);
    add({"arith.extsi", "llvm.sext"}, K::ExtS);
    add({"arith.extui", "llvm.zext"}, K::ExtU);
    add({"arith.trunci", "llvm.trunc"}, K::Trunc);
    add({"arith.index_cast", "index.casts"}, K::CastS);
    add({"arith.index_castui", "index.castu"}, K::CastU);
    add({"arith.bitcast", "llvm.bitcast"}, K::Bitcast);
    add({"llvm.freeze", "arith.freeze"}, K::Freeze);
    add({"arith.addui_extended"}, K::AddUIExtended);
    add({"arith.mulsi_extended"}, K::MulSIExtended);
    add({"arith.mului_extended"}, K::MulUIExtended);
    add({"math.absi", "llvm.intr.abs"}, K::AbsI);
    add({"math.ctlz", "llvm.intr.ctlz"}, K::Ctlz);
    add({"math.cttz", "llvm.intr.cttz"}, K::Cttz);
    add({"math.ctpop", "llvm.intr.ctpop"}, K::Ctpop);
    add({"math.ipowi"}, K::IPowI);
    add({"func.call", "llvm.call"}, K::Call);
    add({"func.return", "llvm.return"}, K::Return);
    add({"scf.yield"}, K::Yield);
    add({"scf.condition"}, K::Condition);
    add({"cf.br"}, K::Br);
    add({"cf.cond_br"}, K::CondBr);
    add({"cf.switch"}, K::Switch);
    add({"scf.for"}, K::For);
    add({"scf.if"}, K::If);
    add({"scf.while"}, K::While);
    add({"scf.execute_region"}, K::ExecuteRegion);
    add({"scf.index_switch"}, K::IndexSwitch);
    add({"memref.alloc", "memref.alloca"}, K::Alloc);
    add({"memref.dealloc"}, K::Dealloc);
    add({"memref.load"}, K::Load);
    add({"memref.store"}, K::Store);
    add({"memref.get_global"}, K::GetGlobal);
    add({"memref.cast", "memref.assume_alignment"}, K::MemCast);
    add({"memref.dim"}, K::Dim);
    add({"memref.copy"}, K::Copy);
    return t;
  }();
  return table;
}

uint8_t predicateOf(llvm::StringRef name) {
  static const llvm::StringMap<uint8_t> table = {
      {"eq", EQ}, {"ne", NE}, {"slt", SLT}, {"sle", SLE}, {"sgt", SGT},
      {"sge", SGE}, {"ult", ULT}, {"ule", ULE}, {"ugt", UGT}, {"uge", UGE}};
  auto found = table.find(name.lower());
  return found == table.end() ? 255 : found->second;
}

class Compiler {
public:
  explicit Compiler(Compiled &c) : c(c) {}

  void module(mlir::ModuleOp module) {
    // symbols first: calls and get_global refer to them by index
    for (mlir::Operation &op : module.getBody()->getOperations()) {
      if (auto function = llvm::dyn_cast<mlir::FunctionOpInterface>(&op)) {
        Function f;
        f.name = function.getName().str();
        f.params = function.getNumArguments();
        f.results = function.getNumResults();
        if (!function.isExternal())
          f.ext = Ext::Defined;
        else if (f.name == "printI64")
          f.ext = Ext::PrintI64;
        else if (f.name == "printComma")
          f.ext = Ext::PrintComma;
        else if (f.name == "printNewline")
          f.ext = Ext::PrintNewline;
        c.byName[f.name] = static_cast<int>(c.functions.size());
        c.functions.push_back(std::move(f));
      } else if (auto global = llvm::dyn_cast<mlir::memref::GlobalOp>(&op)) {
        c.globalByName[global.getSymName()] = static_cast<int>(c.globals.size());
        c.globals.push_back(makeGlobal(global));
      }
    }
    for (mlir::Operation &op : module.getBody()->getOperations()) {
      auto function = llvm::dyn_cast<mlir::FunctionOpInterface>(&op);
      if (!function || function.isExternal())
        continue;
      Function &f = c.functions[c.byName[function.getName()]];
      slots.clear();
      next = 0;
      f.body = region(function.getFunctionBody());
      f.slots = next;
    }
  }

private:
  Compiled &c;
  llvm::DenseMap<mlir::Value, uint32_t> slots;
  uint32_t next = 0;

  static Global makeGlobal(mlir::memref::GlobalOp global) {
    Global g;
    mlir::MemRefType type = global.getType();
    g.bits = widthOf(type.getElementType());
    if (!g.bits || !type.hasStaticShape()) {
      g.known = false;
      g.why = "memref.global @" + global.getSymName().str() + " of a type it does not model";
      return g;
    }
    g.shape.assign(type.getShape().begin(), type.getShape().end());
    if (auto init = global.getInitialValue()) {
      auto dense = llvm::dyn_cast<mlir::DenseIntElementsAttr>(*init);
      if (!dense) {
        g.known = false;
        g.why = "memref.global @" + global.getSymName().str() + " without dense integer elements";
        return g;
      }
      for (APInt value : dense.getValues<APInt>())
        g.init.push_back(value);
    }
    return g;
  }

  uint32_t slot(mlir::Value value) {
    auto [it, inserted] = slots.try_emplace(value, next);
    if (inserted)
      ++next;
    return it->second;
  }

  int region(mlir::Region &r) {
    int index = static_cast<int>(c.regions.size());
    c.regions.emplace_back();
    llvm::DenseMap<mlir::Block *, int> blockIndex;
    for (mlir::Block &b : r)
      blockIndex[&b] = static_cast<int>(blockIndex.size());
    std::vector<Block> blocks(blockIndex.size());
    int k = 0;
    for (mlir::Block &b : r) {
      Block &out = blocks[k++];
      for (mlir::BlockArgument arg : b.getArguments())
        out.args.push_back(slot(arg));
      for (mlir::Operation &op : b)
        out.insts.push_back(inst(&op, blockIndex));
    }
    c.regions[index].blocks = std::move(blocks);
    return index;
  }

  Inst unknown(Inst &i, std::string what) {
    i.kind = K::Unknown;
    i.unknown = std::move(what);
    return std::move(i);
  }

  Inst inst(mlir::Operation *op, llvm::DenseMap<mlir::Block *, int> &blockIndex) {
    Inst i;
    i.op = op;
    auto found = kinds().find(op->getName().getStringRef());
    if (found == kinds().end())
      return unknown(i, "no semantics for " + where(op));
    i.kind = found->second;
    for (mlir::Value operand : op->getOperands())
      i.in.push_back(slot(operand));
    for (mlir::Value result : op->getResults()) {
      i.out.push_back(slot(result));
      if (!widthOf(result.getType()) && !llvm::isa<mlir::BaseMemRefType>(result.getType())) {
        std::string type;
        llvm::raw_string_ostream os(type);
        os << result.getType();
        return unknown(i, "a result of type " + type + " (" + where(op) + ")");
      }
    }
    if (op->getNumResults())
      i.bits = widthOf(op->getResult(0).getType());
    for (mlir::Value operand : op->getOperands()) {
      mlir::Type t = operand.getType();
      if (!widthOf(t) && !llvm::isa<mlir::BaseMemRefType>(t))
        return unknown(i, "an operand of a type it does not model (" + where(op) + ")");
    }
    // flags: arith's and llvm's overflow flags, exact, disjoint, nneg
    if (mlir::Attribute flags = op->getAttr("overflowFlags")) {
      if (auto a = llvm::dyn_cast<mlir::arith::IntegerOverflowFlagsAttr>(flags)) {
        auto v = a.getValue();
        if (mlir::arith::bitEnumContainsAny(v, mlir::arith::IntegerOverflowFlags::nsw))
          i.flags |= NSW;
        if (mlir::arith::bitEnumContainsAny(v, mlir::arith::IntegerOverflowFlags::nuw))
          i.flags |= NUW;
      } else if (auto l = llvm::dyn_cast<mlir::LLVM::IntegerOverflowFlagsAttr>(flags)) {
        auto v = l.getValue();
        if (mlir::LLVM::bitEnumContainsAny(v, mlir::LLVM::IntegerOverflowFlags::nsw))
          i.flags |= NSW;
        if (mlir::LLVM::bitEnumContainsAny(v, mlir::LLVM::IntegerOverflowFlags::nuw))
          i.flags |= NUW;
      }
    }
    if (op->getAttr("isExact"))
      i.flags |= EXACT;
    if (op->getAttr("isDisjoint"))
      i.flags |= DISJOINT;
    if (op->getAttr("nonNeg"))
      i.flags |= NNEG;
    for (mlir::Region &r : op->getRegions())
      i.regions.push_back(r.empty() ? -1 : region(r));

    switch (i.kind) {
    case K::Const: {
      auto value = llvm::dyn_cast_or_null<mlir::IntegerAttr>(op->getAttr("value"));
      if (auto b = llvm::dyn_cast_or_null<mlir::BoolAttr>(op->getAttr("value")))
        i.imm = APInt(1, b.getValue());
      else if (value)
        i.imm = value.getValue().sextOrTrunc(i.bits ? i.bits : value.getValue().getBitWidth());
      else
        return unknown(i, "a constant that is not an integer (" + where(op) + ")");
      if (i.imm.getBitWidth() != i.bits)
        i.imm = i.imm.sextOrTrunc(i.bits);
      break;
    }
    case K::Cmp: {
      std::string name;
      if (auto a = llvm::dyn_cast<mlir::arith::CmpIOp>(op))
        name = mlir::arith::stringifyCmpIPredicate(a.getPredicate()).str();
      else if (auto l = llvm::dyn_cast<mlir::LLVM::ICmpOp>(op))
        name = mlir::LLVM::stringifyICmpPredicate(l.getPredicate()).str();
      else if (auto x = llvm::dyn_cast<mlir::index::CmpOp>(op))
        name = mlir::index::stringifyIndexCmpPredicate(x.getPred()).str();
      i.pred = predicateOf(name);
      if (i.pred == 255)
        return unknown(i, "comparison predicate '" + name + "' (" + where(op) + ")");
      break;
    }
    case K::Call: {
      auto callee = llvm::dyn_cast_or_null<mlir::FlatSymbolRefAttr>(op->getAttr("callee"));
      auto it = callee ? c.byName.find(callee.getValue()) : c.byName.end();
      if (it == c.byName.end())
        return unknown(i, "an indirect call or a call to a missing function (" + where(op) + ")");
      i.ref = it->second;
      if (llvm::isa<mlir::LLVM::CallOp>(op) && op->getNumOperands() != c.functions[i.ref].params)
        return unknown(i, "a variadic or bundled llvm.call (" + where(op) + ")");
      break;
    }
    case K::For:
      if (op->getAttr("unsignedCmp"))
        i.flags |= UNSIGNED_CMP;
      break;
    case K::Br:
    case K::CondBr:
    case K::Switch: {
      auto branch = llvm::cast<mlir::BranchOpInterface>(op);
      for (unsigned s = 0; s < op->getNumSuccessors(); ++s) {
        Succ succ;
        succ.block = blockIndex.lookup(op->getSuccessor(s));
        mlir::SuccessorOperands operands = branch.getSuccessorOperands(s);
        if (operands.getProducedOperandCount())
          return unknown(i, "a branch with produced operands (" + where(op) + ")");
        for (mlir::Value v : operands.getForwardedOperands())
          succ.args.push_back(slot(v));
        i.succs.push_back(std::move(succ));
      }
      if (auto sw = llvm::dyn_cast<mlir::cf::SwitchOp>(op)) {
        if (auto values = sw.getCaseValues())
          for (APInt v : values->getValues<APInt>())
            i.cases.push_back(v.getSExtValue());
        i.bits = widthOf(sw.getFlag().getType());
      }
      break;
    }
    case K::IndexSwitch:
      if (auto cases = llvm::dyn_cast_or_null<mlir::DenseI64ArrayAttr>(op->getAttr("cases")))
        i.cases.assign(cases.asArrayRef().begin(), cases.asArrayRef().end());
      break;
    case K::Alloc: {
      auto type = llvm::cast<mlir::MemRefType>(op->getResult(0).getType());
      if (!type.getLayout().isIdentity() || !widthOf(type.getElementType()) ||
          op->getNumOperands() != static_cast<unsigned>(type.getNumDynamicDims()))
        return unknown(i, "an allocation it does not model (" + where(op) + ")");
      for (int64_t d : type.getShape())
        i.shape.push_back(mlir::ShapedType::isDynamic(d) ? -1 : d);
      i.bits = widthOf(type.getElementType());
      break;
    }
    case K::Load:
    case K::Store: {
      mlir::Value memref = op->getOperand(i.kind == K::Load ? 0 : 1);
      auto type = llvm::dyn_cast<mlir::MemRefType>(memref.getType());
      if (!type || !type.getLayout().isIdentity())
        return unknown(i, "an access through a strided or unranked memref (" + where(op) + ")");
      break;
    }
    case K::GetGlobal: {
      auto name = llvm::dyn_cast_or_null<mlir::FlatSymbolRefAttr>(op->getAttr("name"));
      auto it = name ? c.globalByName.find(name.getValue()) : c.globalByName.end();
      if (it == c.globalByName.end())
        return unknown(i, "memref.get_global of a missing global (" + where(op) + ")");
      if (!c.globals[it->second].known)
        return unknown(i, c.globals[it->second].why);
      i.ref = it->second;
      break;
    }
    case K::Dim:
      if (!llvm::isa<mlir::MemRefType>(op->getOperand(0).getType()))
        return unknown(i, "memref.dim of an unranked memref (" + where(op) + ")");
      break;
    case K::Ctlz:
    case K::Cttz:
    case K::AbsI:
      // llvm.intr.* carry an i1 flag "is_zero_poison" / "is_int_min_poison" as an attribute
      if (auto flag = llvm::dyn_cast_or_null<mlir::BoolAttr>(op->getAttr("is_zero_poison")))
        i.flags |= flag.getValue() ? EXACT : 0;
      if (auto flag = llvm::dyn_cast_or_null<mlir::BoolAttr>(op->getAttr("is_int_min_poison")))
        i.flags |= flag.getValue() ? EXACT : 0;
      break;
    default:
      break;
    }
    return i;
  }
};


} // namespace

void compileModule(mlir::ModuleOp module, Compiled &compiled) { Compiler(compiled).module(module); }

} // namespace loomfuzz::interp
