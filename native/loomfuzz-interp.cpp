// loomfuzz-interp: the IR executor (loomfuzz-interp.h; native/README.md).
//
// Two steps per module: compile every function into flat instructions whose
// operands are slot numbers of a frame (loomfuzz-interp-compile.cpp: one
// walk, no map lookups while running), then run main (here).  Semantics
// follow the dialects' documentation and LLVM's LangRef for what they lower
// to: overflow flags and `exact` give
// poison when violated, a shift by the width or more is poison, division by
// zero or INT_MIN / -1 is undefined behaviour, a branch or an index on
// poison is undefined behaviour, freeze turns poison into 0.

#include "loomfuzz-interp.h"
#include "loomfuzz-interp-ir.h"

#include "mlir/IR/Operation.h"

#include "llvm/ADT/APInt.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace {

using namespace loomfuzz::interp;
using llvm::APInt;
using loomfuzz::InterpStatus;

using loomfuzz::InterpStatus;

class Machine {
public:
  Machine(Compiled &c, uint64_t budget) : c(c), budget(budget) {}

  InterpStatus status = InterpStatus::Ok;
  std::string why, output;

  bool call(int index, llvm::ArrayRef<Val> args, llvm::SmallVectorImpl<Val> &results,
            mlir::Operation *site) {
    Function &f = c.functions[index];
    switch (f.ext) {
    case Ext::PrintI64:
      if (args.size() != 1)
        return stop(InterpStatus::Unknown, "printI64 with " + std::to_string(args.size()) + " arguments");
      output += args[0].poison ? std::string("poison")
                               : std::to_string(args[0].v.sextOrTrunc(64).getSExtValue());
      return true;
    case Ext::PrintComma:
      output += ", ";
      return true;
    case Ext::PrintNewline:
      output += '\n';
      return true;
    case Ext::Missing:
      return stop(InterpStatus::Unknown, "a call to the external function @" + f.name +
                                             (site ? " (" + where(site) + ")" : ""));
    case Ext::Defined:
      break;
    }
    if (++depth > kMaxDepth)
      return stop(InterpStatus::Budget, "call depth above " + std::to_string(kMaxDepth) +
                                            " (in @" + f.name + ")");
    std::vector<Val> frame(f.slots);
    bool ok = runRegion(f.body, frame, args, results);
    --depth;
    return ok;
  }

private:
  static constexpr int kMaxDepth = 256;
  Compiled &c;
  uint64_t budget;
  uint64_t steps = 0;
  int depth = 0;
  std::vector<Buffer> buffers;
  llvm::DenseMap<int, int32_t> globalBuffers;

  bool stop(InterpStatus s, std::string message) {
    if (status == InterpStatus::Ok) {
      status = s;
      why = std::move(message);
    }
    return false;
  }
  bool undefined(const Inst &i, const std::string &what) {
    return stop(InterpStatus::Undefined, what + " (" + where(i.op) + ")");
  }

  // Runs a region from its entry block; the values its scf.yield / return / scf.condition
  // passes out land in `out` (scf.condition: the condition first).
  bool runRegion(int index, std::vector<Val> &frame, llvm::ArrayRef<Val> args,
                 llvm::SmallVectorImpl<Val> &out) {
    out.clear();
    if (index < 0)
      return true;
    Region &r = c.regions[index];
    int b = 0;
    llvm::SmallVector<Val, 4> passed(args.begin(), args.end());
    for (;;) {
      Block &block = r.blocks[b];
      if (passed.size() != block.args.size())
        return stop(InterpStatus::Unknown, "a block entered with the wrong number of values");
      for (size_t k = 0; k < passed.size(); ++k)
        frame[block.args[k]] = passed[k];
      int jump = -1;
      for (Inst &i : block.insts) {
        if (++steps > budget)
          return stop(InterpStatus::Budget, "more than " + std::to_string(budget) + " steps");
        switch (i.kind) {
        case K::Return:
        case K::Yield:
        case K::Condition:
          for (uint32_t s : i.in)
            out.push_back(frame[s]);
          return true;
        case K::Br:
        case K::CondBr:
        case K::Switch: {
          int which = 0;
          if (i.kind != K::Br) {
            const Val &cond = frame[i.in[0]];
            if (cond.poison)
              return undefined(i, "a branch on poison");
            if (i.kind == K::CondBr) {
              which = cond.v.isZero() ? 1 : 0;
            } else { // successor 0 is the default, then one per case value
              int64_t flag = cond.v.getSExtValue();
              for (size_t k = 0; k < i.cases.size(); ++k)
                if (APInt(i.bits, i.cases[k], true) == cond.v) {
                  which = static_cast<int>(k) + 1;
                  break;
                }
              (void)flag;
            }
          }
          passed.clear();
          for (uint32_t s : i.succs[which].args)
            passed.push_back(frame[s]);
          jump = i.succs[which].block;
          break;
        }
        default:
          if (!step(i, frame))
            return false;
        }
        if (jump >= 0)
          break;
      }
      if (jump < 0)
        return stop(InterpStatus::Unknown, "a block without a terminator");
      b = jump;
    }
  }

  static bool cmp(uint8_t pred, const APInt &a, const APInt &b) {
    switch (pred) {
    case EQ: return a == b;
    case NE: return a != b;
    case SLT: return a.slt(b);
    case SLE: return a.sle(b);
    case SGT: return a.sgt(b);
    case SGE: return a.sge(b);
    case ULT: return a.ult(b);
    case ULE: return a.ule(b);
    case UGT: return a.ugt(b);
    default: return a.uge(b);
    }
  }

  void set(std::vector<Val> &frame, uint32_t s, APInt v, bool poison = false) {
    Val &out = frame[s];
    out.v = std::move(v);
    out.poison = poison;
    out.mem = -1;
  }

  // One binary integer op; false on undefined behaviour.
  bool binary(Inst &i, std::vector<Val> &frame) {
    const Val &x = frame[i.in[0]], &y = frame[i.in[1]];
    const APInt &a = x.v, &b = y.v;
    bool poison = x.poison || y.poison;
    unsigned w = a.getBitWidth();
    APInt r;
    bool ov = false;
    switch (i.kind) {
    case K::Add:
      r = a.sadd_ov(b, ov);
      poison |= (i.flags & NSW) && ov;
      (void)a.uadd_ov(b, ov);
      poison |= (i.flags & NUW) && ov;
      break;
    case K::Sub:
      r = a.ssub_ov(b, ov);
      poison |= (i.flags & NSW) && ov;
      (void)a.usub_ov(b, ov);
      poison |= (i.flags & NUW) && ov;
      break;
    case K::Mul:
      r = a.smul_ov(b, ov);
      poison |= (i.flags & NSW) && ov;
      (void)a.umul_ov(b, ov);
      poison |= (i.flags & NUW) && ov;
      break;
    case K::And: r = a & b; break;
    case K::Or:
      r = a | b;
      poison |= (i.flags & DISJOINT) && (a & b) != 0;
      break;
    case K::Xor: r = a ^ b; break;
    case K::Shl:
    case K::ShrS:
    case K::ShrU: {
      if (b.uge(w)) {
        poison = true;
        r = APInt(w, 0);
        break;
      }
      unsigned s = static_cast<unsigned>(b.getZExtValue());
      if (i.kind == K::Shl) {
        r = a.shl(s);
        poison |= (i.flags & NSW) && r.ashr(s) != a;
        poison |= (i.flags & NUW) && r.lshr(s) != a;
      } else {
        r = i.kind == K::ShrS ? a.ashr(s) : a.lshr(s);
        poison |= (i.flags & EXACT) && s && !a.extractBits(s, 0).isZero();
      }
      break;
    }
    case K::DivS: case K::DivU: case K::RemS: case K::RemU:
    case K::CeilDivS: case K::CeilDivU: case K::FloorDivS: {
      if (y.poison)
        return undefined(i, "a division by poison");
      if (b.isZero())
        return undefined(i, "a division by zero");
      bool isSigned = i.kind == K::DivS || i.kind == K::RemS || i.kind == K::CeilDivS ||
                      i.kind == K::FloorDivS;
      if (isSigned && a.isMinSignedValue() && b.isAllOnes()) {
        if (x.poison) { // poison / -1: poison, not the trap of INT_MIN / -1
          r = APInt(w, 0);
          break;
        }
        return undefined(i, "a signed division overflow (INT_MIN / -1)");
      }
      switch (i.kind) {
      case K::DivS: r = a.sdiv(b); poison |= (i.flags & EXACT) && !a.srem(b).isZero(); break;
      case K::DivU: r = a.udiv(b); poison |= (i.flags & EXACT) && !a.urem(b).isZero(); break;
      case K::RemS: r = a.srem(b); break;
      case K::RemU: r = a.urem(b); break;
      case K::CeilDivS: r = llvm::APIntOps::RoundingSDiv(a, b, APInt::Rounding::UP); break;
      case K::CeilDivU: r = llvm::APIntOps::RoundingUDiv(a, b, APInt::Rounding::UP); break;
      default: r = llvm::APIntOps::RoundingSDiv(a, b, APInt::Rounding::DOWN); break;
      }
      break;
    }
    case K::IPowI: {
      // math.ipowi: a to the power b, wrapping at the width; a negative exponent is left
      // undefined here (the programs mask theirs; MLIR's expansions disagree on it)
      if (b.isNegative())
        return undefined(i, "math.ipowi with a negative exponent");
      r = APInt(w, 1);
      APInt base = a;
      for (unsigned bit = 0, n = b.getActiveBits(); bit < n; ++bit) {
        if (b[bit])
          r *= base;
        base *= base;
      }
      break;
    }
    case K::MaxS: r = llvm::APIntOps::smax(a, b); break;
    case K::MaxU: r = llvm::APIntOps::umax(a, b); break;
    case K::MinS: r = llvm::APIntOps::smin(a, b); break;
    case K::MinU: r = llvm::APIntOps::umin(a, b); break;
    default: r = APInt(1, cmp(i.pred, a, b)); break; // K::Cmp
    }
    set(frame, i.out[0], std::move(r), poison);
    return true;
  }

  Buffer *buffer(const Inst &i, const Val &v) {
    if (v.mem < 0 || v.mem >= static_cast<int32_t>(buffers.size())) {
      stop(InterpStatus::Unknown, "a memref that is not a buffer (" + where(i.op) + ")");
      return nullptr;
    }
    Buffer &b = buffers[v.mem];
    if (b.freed) {
      undefined(i, "an access to a deallocated buffer");
      return nullptr;
    }
    return &b;
  }

  // The cell of `indices` (operands from `first` on), or -1 after stopping.
  int64_t cell(const Inst &i, std::vector<Val> &frame, const Buffer &b, size_t first) {
    if (i.in.size() - first != b.shape.size()) {
      stop(InterpStatus::Unknown, "an access of the wrong rank (" + where(i.op) + ")");
      return -1;
    }
    int64_t at = 0;
    for (size_t d = 0; d < b.shape.size(); ++d) {
      const Val &index = frame[i.in[first + d]];
      if (index.poison) {
        undefined(i, "an access at a poison index");
        return -1;
      }
      int64_t k = index.v.getSExtValue();
      if (k < 0 || k >= b.shape[d]) {
        undefined(i, "an access at index " + std::to_string(k) + " of a dimension of " +
                         std::to_string(b.shape[d]));
        return -1;
      }
      at = at * b.shape[d] + k;
    }
    return at;
  }

  int32_t allocate(llvm::ArrayRef<int64_t> shape, unsigned bits, const std::vector<APInt> *init) {
    Buffer b;
    b.shape.assign(shape.begin(), shape.end());
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    b.cells.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      Val &v = b.cells[k];
      if (init && !init->empty()) { // a splat has one element
        v.v = (*init)[init->size() == 1 ? 0 : k];
      } else {
        v.v = APInt(bits, 0);
        v.poison = true; // never written: no defined value
      }
    }
    buffers.push_back(std::move(b));
    return static_cast<int32_t>(buffers.size() - 1);
  }

  bool step(Inst &i, std::vector<Val> &frame) {
    switch (i.kind) {
    case K::Unknown:
      return stop(InterpStatus::Unknown, i.unknown);
    case K::Const:
      set(frame, i.out[0], i.imm);
      return true;
    case K::Poison:
      set(frame, i.out[0], APInt(i.bits, 0), true);
      return true;
    case K::Add: case K::Sub: case K::Mul: case K::And: case K::Or: case K::Xor:
    case K::Shl: case K::ShrS: case K::ShrU: case K::DivS: case K::DivU: case K::RemS:
    case K::RemU: case K::CeilDivS: case K::CeilDivU: case K::FloorDivS: case K::MaxS:
    case K::MaxU: case K::MinS: case K::MinU: case K::Cmp: case K::IPowI:
      return binary(i, frame);
    case K::Select: {
      const Val &cond = frame[i.in[0]];
      if (cond.poison) {
        Val out = frame[i.in[1]];
        out.poison = true;
        frame[i.out[0]] = out;
        return true;
      }
      frame[i.out[0]] = frame[i.in[cond.v.isZero() ? 2 : 1]];
      return true;
    }
    case K::ExtS: case K::ExtU: case K::Trunc: case K::CastS: case K::CastU: case K::Bitcast: {
      const Val &x = frame[i.in[0]];
      bool poison = x.poison;
      APInt r;
      switch (i.kind) {
      case K::ExtS: case K::CastS: r = x.v.sextOrTrunc(i.bits); break;
      case K::ExtU: case K::CastU:
        r = x.v.zextOrTrunc(i.bits);
        poison |= (i.flags & NNEG) && x.v.isNegative();
        break;
      case K::Trunc:
        r = x.v.trunc(i.bits);
        poison |= (i.flags & NSW) && r.sext(x.v.getBitWidth()) != x.v;
        poison |= (i.flags & NUW) && r.zext(x.v.getBitWidth()) != x.v;
        break;
      default: r = x.v; break;
      }
      set(frame, i.out[0], std::move(r), poison);
      return true;
    }
    case K::Freeze: {
      const Val &x = frame[i.in[0]];
      set(frame, i.out[0], x.poison ? APInt(i.bits, 0) : x.v);
      return true;
    }
    case K::AddUIExtended: case K::MulSIExtended: case K::MulUIExtended: {
      const Val &x = frame[i.in[0]], &y = frame[i.in[1]];
      bool poison = x.poison || y.poison;
      unsigned w = x.v.getBitWidth();
      if (i.kind == K::AddUIExtended) {
        bool ov = false;
        APInt sum = x.v.uadd_ov(y.v, ov);
        set(frame, i.out[0], sum, poison);
        set(frame, i.out[1], APInt(1, ov), poison);
      } else {
        bool s = i.kind == K::MulSIExtended;
        APInt a = s ? x.v.sext(2 * w) : x.v.zext(2 * w), b = s ? y.v.sext(2 * w) : y.v.zext(2 * w);
        APInt product = a * b;
        set(frame, i.out[0], product.trunc(w), poison);
        set(frame, i.out[1], product.extractBits(w, w), poison);
      }
      return true;
    }
    case K::AbsI: case K::Ctlz: case K::Cttz: case K::Ctpop: {
      const Val &x = frame[i.in[0]];
      bool poison = x.poison;
      unsigned w = x.v.getBitWidth();
      APInt r;
      switch (i.kind) {
      case K::AbsI: r = x.v.abs(); poison |= (i.flags & EXACT) && x.v.isMinSignedValue(); break;
      case K::Ctlz: r = APInt(w, x.v.countl_zero()); poison |= (i.flags & EXACT) && x.v.isZero(); break;
      case K::Cttz: r = APInt(w, x.v.countr_zero()); poison |= (i.flags & EXACT) && x.v.isZero(); break;
      default: r = APInt(w, x.v.popcount()); break;
      }
      set(frame, i.out[0], std::move(r), poison);
      return true;
    }
    case K::Call: {
      llvm::SmallVector<Val, 4> args, results;
      for (uint32_t s : i.in)
        args.push_back(frame[s]);
      if (!call(i.ref, args, results, i.op))
        return false;
      if (results.size() != i.out.size())
        return stop(InterpStatus::Unknown, "a call whose callee returns another number of values (" +
                                               where(i.op) + ")");
      for (size_t k = 0; k < results.size(); ++k)
        frame[i.out[k]] = results[k];
      return true;
    }
    case K::For: {
      const Val &lo = frame[i.in[0]], &hi = frame[i.in[1]], &st = frame[i.in[2]];
      if (lo.poison || hi.poison || st.poison)
        return undefined(i, "a loop with poison bounds");
      bool isUnsigned = i.flags & UNSIGNED_CMP;
      if (st.v.isZero() || (!isUnsigned && st.v.isNegative()))
        return undefined(i, "a loop step that is not positive");
      llvm::SmallVector<Val, 4> carried, yielded;
      carried.push_back(lo);
      for (size_t k = 3; k < i.in.size(); ++k)
        carried.push_back(frame[i.in[k]]);
      APInt iv = lo.v;
      while (isUnsigned ? iv.ult(hi.v) : iv.slt(hi.v)) {
        carried[0].v = iv;
        if (!runRegion(i.regions[0], frame, carried, yielded))
          return false;
        for (size_t k = 0; k < yielded.size() && k + 1 < carried.size(); ++k)
          carried[k + 1] = yielded[k];
        bool ov = false;
        iv = isUnsigned ? iv.uadd_ov(st.v, ov) : iv.sadd_ov(st.v, ov);
        if (ov)
          break; // the next value would not be below the bound: the loop is over
      }
      for (size_t k = 0; k < i.out.size(); ++k)
        frame[i.out[k]] = carried[k + 1];
      return true;
    }
    case K::If: {
      const Val &cond = frame[i.in[0]];
      if (cond.poison)
        return undefined(i, "scf.if on poison");
      llvm::SmallVector<Val, 4> yielded;
      int region = i.regions[cond.v.isZero() ? 1 : 0];
      if (!runRegion(region, frame, {}, yielded))
        return false;
      for (size_t k = 0; k < i.out.size() && k < yielded.size(); ++k)
        frame[i.out[k]] = yielded[k];
      return true;
    }
    case K::While: {
      llvm::SmallVector<Val, 4> values, yielded;
      for (uint32_t s : i.in)
        values.push_back(frame[s]);
      for (;;) {
        if (!runRegion(i.regions[0], frame, values, yielded))
          return false;
        if (yielded.empty() || yielded[0].poison)
          return undefined(i, "scf.condition on poison");
        bool go = !yielded[0].v.isZero();
        values.assign(yielded.begin() + 1, yielded.end());
        if (!go)
          break;
        if (!runRegion(i.regions[1], frame, values, yielded))
          return false;
        values.assign(yielded.begin(), yielded.end());
      }
      for (size_t k = 0; k < i.out.size() && k < values.size(); ++k)
        frame[i.out[k]] = values[k];
      return true;
    }
    case K::ExecuteRegion:
    case K::IndexSwitch: {
      int region = i.regions[0];
      if (i.kind == K::IndexSwitch) { // regions: the default, then one per case
        const Val &arg = frame[i.in[0]];
        if (arg.poison)
          return undefined(i, "scf.index_switch on poison");
        for (size_t k = 0; k < i.cases.size(); ++k)
          if (arg.v.getSExtValue() == i.cases[k])
            region = i.regions[k + 1];
      }
      llvm::SmallVector<Val, 4> yielded;
      if (!runRegion(region, frame, {}, yielded))
        return false;
      for (size_t k = 0; k < i.out.size() && k < yielded.size(); ++k)
        frame[i.out[k]] = yielded[k];
      return true;
    }
    case K::Alloc: {
      llvm::SmallVector<int64_t, 2> shape;
      size_t dynamic = 0;
      for (int64_t d : i.shape) {
        if (d >= 0) {
          shape.push_back(d);
          continue;
        }
        const Val &size = frame[i.in[dynamic++]];
        if (size.poison || size.v.isNegative() || size.v.sgt(1 << 20))
          return undefined(i, "an allocation of a poison, negative or huge size");
        shape.push_back(size.v.getSExtValue());
      }
      Val out;
      out.mem = allocate(shape, i.bits, nullptr);
      out.v = APInt(64, 0);
      frame[i.out[0]] = out;
      return true;
    }
    case K::Dealloc: {
      Buffer *b = buffer(i, frame[i.in[0]]);
      if (!b)
        return false;
      b->freed = true;
      return true;
    }
    case K::Load: {
      Buffer *b = buffer(i, frame[i.in[0]]);
      if (!b)
        return false;
      int64_t at = cell(i, frame, *b, 1);
      if (at < 0)
        return false;
      frame[i.out[0]] = b->cells[at];
      return true;
    }
    case K::Store: {
      Buffer *b = buffer(i, frame[i.in[1]]);
      if (!b)
        return false;
      int64_t at = cell(i, frame, *b, 2);
      if (at < 0)
        return false;
      b->cells[at] = frame[i.in[0]];
      return true;
    }
    case K::GetGlobal: {
      auto [it, inserted] = globalBuffers.try_emplace(i.ref, -1);
      if (inserted) {
        Global &g = c.globals[i.ref];
        it->second = allocate(g.shape, g.bits, &g.init);
      }
      Val out;
      out.mem = it->second;
      out.v = APInt(64, 0);
      frame[i.out[0]] = out;
      return true;
    }
    case K::MemCast:
      if (!i.out.empty()) // memref.assume_alignment had no result before LLVM 21
        frame[i.out[0]] = frame[i.in[0]];
      return true;
    case K::Dim: {
      Buffer *b = buffer(i, frame[i.in[0]]);
      if (!b)
        return false;
      const Val &d = frame[i.in[1]];
      if (d.poison || d.v.isNegative() || d.v.sge(static_cast<int64_t>(b->shape.size()))) {
        set(frame, i.out[0], APInt(64, 0), true); // out of range: undefined in MLIR; poison here
        return true;
      }
      set(frame, i.out[0], APInt(64, b->shape[d.v.getZExtValue()]));
      return true;
    }
    case K::Copy: {
      Buffer *from = buffer(i, frame[i.in[0]]);
      Buffer *to = from ? buffer(i, frame[i.in[1]]) : nullptr;
      if (!from || !to)
        return false;
      if (from->shape != to->shape)
        return undefined(i, "memref.copy between shapes that differ");
      to->cells = from->cells;
      return true;
    }
    default:
      return stop(InterpStatus::Unknown, "no semantics for " + where(i.op));
    }
  }
};

} // namespace

namespace loomfuzz {

const char *interpStatusName(InterpStatus status) {
  switch (status) {
  case InterpStatus::Ok: return "ok";
  case InterpStatus::Unknown: return "unknown";
  case InterpStatus::Undefined: return "undefined";
  case InterpStatus::Budget: return "budget";
  case InterpStatus::NoMain: return "no-main";
  }
  return "?";
}

InterpResult interpret(mlir::ModuleOp module, uint64_t budget) {
  InterpResult result;
  Compiled compiled;
  compileModule(module, compiled);
  auto main = compiled.byName.find("main");
  if (main == compiled.byName.end() || compiled.functions[main->second].ext != Ext::Defined ||
      compiled.functions[main->second].params != 0 || compiled.functions[main->second].results != 0) {
    result.status = InterpStatus::NoMain;
    result.why = "no function main of type () -> ()";
    return result;
  }
  Machine machine(compiled, budget);
  llvm::SmallVector<Val, 1> results;
  machine.call(main->second, {}, results, nullptr);
  result.status = machine.status;
  result.output = std::move(machine.output);
  result.why = std::move(machine.why);
  return result;
}

} // namespace loomfuzz
