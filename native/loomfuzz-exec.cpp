// loomfuzz-exec: the driver's --exec mode; the protocol is in loomfuzz-exec.h
// and native/README.md.  Here: reading a request and writing its answer, the
// stage markers and timings, parse / optimize / reparse / lower (prepare), the
// IR executor's calls and a batch's run; translating, compiling and calling
// the lowered modules is loomfuzz-exec-jit.cpp's (BatchJit).

#include "loomfuzz-exec.h"
#include "loomfuzz-exec-jit.h"
#include "loomfuzz-interp.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/raw_ostream.h"

#include <ctime>
#include <cstdint>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

// The reference lowering: harness.execute.toolchain.LOWERING, in this order
// (added to a pass manager anchored on builtin.module: no anchor here).
constexpr const char *kLowering =
    "convert-math-to-funcs,arith-expand,convert-scf-to-cf,convert-to-llvm,reconcile-unrealized-casts";
constexpr uint32_t kOptimizeHere = 0xFFFFFFFFu;
constexpr uint32_t kSkipOriginal = 1u; // request flag: do not lower, compile or run the original
constexpr uint32_t kInterpret = 2u;    // request flag: execute with the IR executor (loomfuzz-interp.h)
constexpr uint32_t kAlsoJit = 4u;      // with kInterpret: the JIT too, whatever the IR executor says
constexpr uint32_t kRanInterp = 1u;    // response `executed`: the IR executor gave both outputs
constexpr uint32_t kRanJit = 2u;       // response `executed`: lowered, compiled and run

// CPU seconds per stage since the driver started, when asked (--exec-timings):
// where a batch's time goes, for benchmarks/bench_exec.py.
bool timings = false;
std::map<std::string, double> secondsIn;
std::string currentStage;
double stageStart = 0;

// CPU seconds of this process: on a loaded machine the wall clock says little.
double cpuSeconds() {
  timespec t;
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

void account(const char *next) {
  double now = cpuSeconds();
  if (!currentStage.empty())
    secondsIn[currentStage] += now - stageStart;
  currentStage = next;
  stageStart = now;
}

// A stage inside a marked one, timed only (--exec-timings): no marker line.
void substage(const char *name) {
  if (timings)
    account(name);
}

// Written straight to fd 2 (no buffering): it must be there when the process dies.
void marker(long program, const char *stage) {
  if (timings)
    account(stage);
  std::string line = "loomfuzz-exec: program " + std::to_string(program) + " stage " + stage + "\n";
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
}

struct Reader {
  llvm::StringRef data;
  bool ok = true;
  uint32_t u32() {
    if (data.size() < 4) {
      ok = false;
      return 0;
    }
    auto b = reinterpret_cast<const unsigned char *>(data.data());
    uint32_t v = uint32_t(b[0]) | (uint32_t(b[1]) << 8) | (uint32_t(b[2]) << 16) |
                 (uint32_t(b[3]) << 24);
    data = data.drop_front(4);
    return v;
  }
  llvm::StringRef bytes(uint32_t n) {
    if (data.size() < n) {
      ok = false;
      return {};
    }
    llvm::StringRef out = data.take_front(n);
    data = data.drop_front(n);
    return out;
  }
};

void putU32(std::string &out, uint32_t v) {
  char b[4] = {char(v & 0xff), char((v >> 8) & 0xff), char((v >> 16) & 0xff),
               char((v >> 24) & 0xff)};
  out.append(b, 4);
}

void putString(std::string &out, llvm::StringRef s) {
  putU32(out, static_cast<uint32_t>(s.size()));
  out.append(s.data(), s.size());
}

struct Program {
  llvm::StringRef original;
  bool runOriginal = true; // false: the harness knows its output (the interpreter's)
  bool interpret = false;  // the IR executor first
  bool alsoJit = false;    // and the JIT whatever it says (a cross-check, a confirmation)
  bool jit = true;         // lowered and JIT-compiled (false: the IR executor's outputs suffice)
  uint32_t executed = 0;   // kRanInterp | kRanJit
  loomfuzz::InterpStatus irStatus = loomfuzz::InterpStatus::Ok;
  uint32_t irSide = 0; // where the IR executor stopped: 0 the original, 1 the optimized module
  std::string irWhy, irReference, irOptimized;
  bool optimizeHere = true;
  llvm::StringRef given; // the optimized text, when it came with the request
  loomfuzz::ExecStage stage = loomfuzz::ExecStage::Ok;
  std::string detail, referenceOutput, optimizedOutput, optimizedText;
  mlir::OwningOpRef<mlir::ModuleOp> lowered; // both sides, until moved into the batch
};

} // namespace

namespace loomfuzz {

void reportExecTimings(bool on) { timings = on; }

void prepareExec(mlir::DialectRegistry &registry) { BatchJit::prepare(registry); }

struct ExecService::Impl {
  mlir::MLIRContext &context;
  std::function<mlir::PassManager *()> optimizer;
  std::unique_ptr<mlir::PassManager> lowering;
  BatchJit batchJit; // translates, compiles and runs a batch's lowered modules

  // Parses `text` (diagnostics into `diagnostics`, the buffer named <stdin> as
  // mlir-opt names what it reads).
  mlir::OwningOpRef<mlir::ModuleOp> parse(llvm::StringRef text, std::string &diagnostics) {
    llvm::raw_string_ostream stream(diagnostics);
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, "<stdin>"),
                                 llvm::SMLoc());
    mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, stream);
    mlir::ParserConfig config(&context, /*verifyAfterParse=*/true);
    return mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, config);
  }

  // Runs `pm` on `module` (diagnostics, locations of the buffer they came from).
  bool run(mlir::PassManager &pm, mlir::ModuleOp module, std::string &diagnostics) {
    llvm::raw_string_ostream stream(diagnostics);
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
      stream << diag.getLocation() << ": " << diag << "\n";
      return mlir::success();
    });
    return mlir::succeeded(pm.run(module));
  }

  // The reference lowering of `module`, verified once at its end (the pass
  // manager does not verify between its passes: the input was verified when
  // parsed, and four verifications cost a third of the lowering).
  bool lower(mlir::ModuleOp module, std::string &diagnostics) {
    if (!run(*lowering, module, diagnostics))
      return false;
    llvm::raw_string_ostream stream(diagnostics);
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
      stream << diag.getLocation() << ": " << diag << "\n";
      return mlir::success();
    });
    return mlir::succeeded(mlir::verify(module));
  }

  // Parse, optimize (or take the given text), reparse, lower: everything up to the JIT.
  // The IR executor runs on the original before the pipeline: where it judges the
  // original and no JIT is asked for, the pipeline runs on the parsed module itself
  // (as mlir-opt's does), not on a clone; the rare JIT that follows an IR executor
  // that cannot judge the optimized side parses the original again (same text, same
  // module).
  void prepare(long k, Program &p) {
    marker(k, "parse");
    mlir::OwningOpRef<mlir::ModuleOp> original = parse(p.original, p.detail);
    if (!original) {
      p.stage = ExecStage::Parse;
      return;
    }
    // true: the IR executor gave the original's output (or the harness knows it)
    bool originalJudged = p.interpret && (!p.runOriginal || interpretOriginal(k, p, *original));
    bool keepOriginal = p.runOriginal && (!originalJudged || p.alsoJit);
    if (p.optimizeHere) {
      marker(k, "optimize");
      mlir::PassManager *pm = optimizer();
      mlir::OwningOpRef<mlir::ModuleOp> target =
          keepOriginal ? mlir::OwningOpRef<mlir::ModuleOp>(original->clone()) : std::move(original);
      substage("optimize-run");
      if (!pm || !run(*pm, *target, p.detail)) {
        p.stage = ExecStage::Optimize;
        forgetInterpretation(p);
        return;
      }
      substage("optimize-print");
      llvm::raw_string_ostream os(p.optimizedText);
      target->print(os);
      os << '\n';
      substage("optimize-free");
    } else {
      p.optimizedText = p.given.str();
    }
    if (!keepOriginal)
      original = nullptr;
    // What a separate process would read: the printed text, parsed again.
    marker(k, "reparse");
    mlir::OwningOpRef<mlir::ModuleOp> optimized = parse(p.optimizedText, p.detail);
    if (!optimized) {
      p.stage = ExecStage::Reparse;
      forgetInterpretation(p);
      return;
    }
    if (originalJudged && interpretOptimized(k, p, *optimized) && !p.alsoJit) {
      p.jit = false; // the IR executor's outputs are the answer: no lowering, no JIT
      substage("free"); // the module goes on return
      return;
    }
    if (p.runOriginal && !original) { // it parsed once: it parses again, to the same module
      std::string ignored;
      marker(k, "parse");
      original = parse(p.original, ignored);
    }
    // Both sides in one module (symbols r<k>_ and o<k>_), lowered in one run.
    std::string key = std::to_string(k);
    p.lowered = mlir::ModuleOp::create(mlir::UnknownLoc::get(&context));
    mlir::SymbolTable table(*p.lowered);
    if (p.runOriginal)
      BatchJit::absorb(*original, *p.lowered, table, "r" + key + "_");
    BatchJit::absorb(*optimized, *p.lowered, table, "o" + key + "_");
    marker(k, "lower");
    std::string detail;
    if (!lower(*p.lowered, detail)) {
      // whose?  The original alone says (rare: the reference lowering refuses little)
      p.lowered = nullptr;
      std::string ignored;
      mlir::OwningOpRef<mlir::ModuleOp> alone = parse(p.original, ignored);
      bool originalLowers = !p.runOriginal || (alone && lower(*alone, ignored));
      p.stage = originalLowers ? ExecStage::LowerOptimized : ExecStage::Lower;
      p.detail += detail;
    }
  }

  // The IR executor on the original (run only when the harness does not know its output);
  // true when it gave it.  It runs on the module as parsed, before anything else.
  bool interpretOriginal(long k, Program &p, mlir::ModuleOp original) {
    marker(k, "interpret");
    InterpResult r = interpret(original);
    if (r.status != InterpStatus::Ok) {
      p.irStatus = r.status;
      p.irSide = 0;
      p.irWhy = std::move(r.why);
      return false;
    }
    p.irReference = std::move(r.output);
    return true;
  }

  // The IR executor on the optimized module, after the original's; true when it gave
  // both outputs.
  bool interpretOptimized(long k, Program &p, mlir::ModuleOp optimized) {
    marker(k, "interpret-optimized");
    InterpResult o = interpret(optimized);
    p.irOptimized = std::move(o.output);
    if (o.status != InterpStatus::Ok) {
      p.irStatus = o.status;
      p.irSide = 1;
      p.irWhy = std::move(o.why);
      return false;
    }
    p.executed |= kRanInterp;
    return true;
  }

  // A stage after the original's interpretation failed: the answer says nothing of the
  // IR executor, as when it ran only once both modules were there.
  static void forgetInterpretation(Program &p) {
    p.irStatus = InterpStatus::Ok;
    p.irSide = 0;
    p.irWhy.clear();
    p.irReference.clear();
  }
  // Every prepared program of the batch in one module: one translation and one
  // codegen for all.  Only the mains are looked up from outside.
  void runBatch(std::vector<Program> &programs) {
    std::vector<size_t> live;
    for (size_t k = 0; k < programs.size(); ++k)
      if (programs[k].stage == ExecStage::Ok && programs[k].jit)
        live.push_back(k);
    if (live.empty())
      return;
    mlir::OwningOpRef<mlir::ModuleOp> combined(
        mlir::ModuleOp::create(mlir::UnknownLoc::get(&context)));
    mlir::SymbolTable table(*combined);
    for (size_t k : live) {
      BatchJit::absorb(*programs[k].lowered, *combined, table, "");
      programs[k].lowered = nullptr;
    }
    for (auto function : combined->getOps<mlir::LLVM::LLVMFuncOp>())
      if (!function.isExternal() && !function.getSymName().ends_with("_main"))
        function.setLinkage(mlir::LLVM::Linkage::Internal);
    // A main that is missing or of another type is never called: the original's is the
    // reference's failure; the optimized module's the target's, after the original ran.
    std::vector<std::string> mains;
    std::vector<size_t> callable;
    std::vector<bool> optimizedCallable(programs.size(), false);
    for (size_t k : live) {
      Program &p = programs[k];
      std::string key = std::to_string(k);
      if (p.runOriginal && !BatchJit::hasMain(table, "r" + key + "_main")) {
        p.stage = ExecStage::Run;
        p.detail += "the lowered original has no function main of type () -> ()\n";
        continue;
      }
      if (p.runOriginal)
        mains.push_back("r" + key + "_main");
      optimizedCallable[k] = BatchJit::hasMain(table, "o" + key + "_main");
      if (optimizedCallable[k])
        mains.push_back("o" + key + "_main");
      else
        p.detail += "the lowered optimized module has no function main of type () -> ()\n";
      callable.push_back(k);
    }
    if (callable.empty())
      return;
    marker(callable.size() == 1 ? static_cast<long>(callable[0]) : -1, "jit");
    std::string detail;
    std::unique_ptr<BatchJit::Loaded> loaded = batchJit.jit(*combined, mains, detail);
    if (!loaded) {
      for (size_t k : callable) {
        Program &p = programs[k];
        p.detail += detail;
        // a batch: the harness asks again one by one; one program: whose is it?
        p.stage = callable.size() > 1 ? ExecStage::JitBatch
                  : (!p.runOriginal || compilesAlone(p.original) ? ExecStage::JitOptimized
                                                                 : ExecStage::Jit);
      }
      return;
    }
    for (size_t k : callable) {
      Program &p = programs[k];
      std::string key = std::to_string(k);
      p.executed |= kRanJit;
      if (p.runOriginal) {
        marker(static_cast<long>(k), "run");
        BatchJit::call(loaded->mains["r" + key + "_main"], p.referenceOutput);
      }
      if (!optimizedCallable[k]) {
        p.stage = ExecStage::RunOptimized;
        continue;
      }
      marker(static_cast<long>(k), "run-optimized");
      BatchJit::call(loaded->mains["o" + key + "_main"], p.optimizedOutput);
    }
  }

  // Whether the original alone lowers and compiles (to tell whose a failure is).
  bool compilesAlone(llvm::StringRef text) {
    std::string ignored;
    mlir::OwningOpRef<mlir::ModuleOp> alone = parse(text, ignored);
    return alone && lower(*alone, ignored) && batchJit.jit(*alone, {"main"}, ignored) != nullptr;
  }
};

ExecService::ExecService(mlir::MLIRContext &context,
                         std::function<mlir::PassManager *()> optimizer)
    : impl(new Impl{context, std::move(optimizer), nullptr}) {
  impl->lowering = std::make_unique<mlir::PassManager>(&context);
  if (mlir::failed(mlir::parsePassPipeline(kLowering, *impl->lowering, llvm::errs())))
    impl->lowering.reset(); // cannot happen with MLIR 22's passes; handle() says so
  else // verified once, after the last pass (lowered()): a third of the lowering's time
    impl->lowering->enableVerifier(false);
}

ExecService::~ExecService() = default;

bool ExecService::handle(llvm::StringRef request, std::string &response, std::string &error) {
  if (!impl->lowering) {
    error = "the reference lowering pipeline does not parse";
    return false;
  }
  Reader in{request};
  uint32_t count = in.u32();
  std::vector<Program> programs(in.ok ? count : 0);
  for (Program &p : programs) {
    uint32_t flags = in.u32();
    p.runOriginal = (flags & kSkipOriginal) == 0;
    p.interpret = (flags & kInterpret) != 0;
    p.alsoJit = (flags & kAlsoJit) != 0;
    p.original = in.bytes(in.u32());
    uint32_t n = in.u32();
    p.optimizeHere = n == kOptimizeHere;
    if (!p.optimizeHere)
      p.given = in.bytes(n);
  }
  if (!in.ok || !in.data.empty()) {
    error = "malformed --exec request (count, then length-prefixed texts)";
    return false;
  }
  for (size_t k = 0; k < programs.size(); ++k)
    impl->prepare(static_cast<long>(k), programs[k]);
  impl->runBatch(programs);
  marker(-1, "answer");
  if (timings) {
    std::string line = "loomfuzz-exec: cpu seconds";
    for (auto &[stage, seconds] : secondsIn)
      line += " " + stage + "=" + std::to_string(seconds);
    line += "\n";
    ssize_t ignored = ::write(2, line.data(), line.size());
    (void)ignored;
    llvm::TimerGroup::printAll(llvm::errs()); // with -time-passes: LLVM's codegen passes
  }
  response.clear();
  putU32(response, count);
  for (Program &p : programs) {
    putU32(response, static_cast<uint32_t>(p.stage));
    putString(response, p.detail);
    putString(response, p.referenceOutput);
    putString(response, p.optimizedOutput);
    putString(response, p.optimizedText);
    putU32(response, p.executed);
    putU32(response, static_cast<uint32_t>(p.irStatus));
    putU32(response, p.irSide);
    putString(response, p.irWhy);
    putString(response, p.irReference);
    putString(response, p.irOptimized);
  }
  return true;
}

} // namespace loomfuzz
