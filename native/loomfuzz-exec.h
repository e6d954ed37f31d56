// loomfuzz-exec: the driver's --exec mode (native/README.md, "Execution in process").
//
// One request is a batch of exec modules (harness.execute.exec_rendering), each
// with or without its optimized text.  For each: parse the original once;
// unless the optimized text came with the request, run the optimization
// pipeline (on the parsed module itself; on a clone where the JIT is known to
// need the original), print it and parse the printed text again (what is executed
// is what a separate mlir-opt process would have printed); lower both with the
// reference lowering (the passes of harness.execute.toolchain.LOWERING); then
// JIT every lowered module of the batch as one LLVM module (symbols prefixed
// r<k>_ / o<k>_), call each main in turn and capture what it prints through
// our own printI64 / printComma / printNewline.  loomfuzz-exec.cpp has the
// protocol and everything up to the lowering; loomfuzz-exec-jit.h the JIT.
//
// With request flag 2 both modules are first executed by the IR executor
// (loomfuzz-interp.h; the original before the pipeline runs); when it gives
// both outputs (and flag 4 does not ask for the JIT too) nothing is lowered or
// compiled.
//
// Request (u32 little-endian): count N, then N times: flags (bit 0: the
// harness knows the original's output, do not execute it; bit 1: the IR
// executor first; bit 2: with bit 1, the JIT too), original length + bytes,
// optimized length + bytes (0xFFFFFFFF: optimize here with the driver's
// pipeline).
// Response: count N, then N times: stage (ExecStage), then four strings
// (u32 length + bytes): detail (diagnostics of the failing stage), the
// original's output, the optimized module's output (the JIT's when it ran,
// else the IR executor's), the optimized text; then u32 executed (bit 0 the
// IR executor gave both outputs, bit 1 the JIT ran), u32 InterpStatus, u32
// where it stopped (0 the original, 1 the optimized module), and three
// strings: why, the IR executor's output of the original, of the optimized.
//
// Before each stage the driver writes "loomfuzz-exec: program K stage NAME"
// on stderr (K = -1: the whole batch), so that a crash or a hang, which
// leaves no answer, is attributed to one program and one stage.
#pragma once

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"

#include <functional>
#include <memory>
#include <string>

namespace loomfuzz {

enum class ExecStage : uint32_t {
  Ok = 0,
  Parse = 1,          // the original does not parse or verify (the reference's)
  Optimize = 2,       // the pipeline failed (the target's)
  Reparse = 3,        // the optimized text does not parse or verify (the target's)
  Lower = 4,          // lowering the original failed (the reference's)
  LowerOptimized = 5, // lowering the optimized module failed
  Jit = 6,            // translating / compiling the original failed
  JitOptimized = 7,   // translating / compiling the optimized module failed
  JitBatch = 8,       // the batch's combined module did not compile: ask again one by one
  Run = 9,            // the original has no callable main
  RunOptimized = 10,  // the optimized module has no callable main
};

// Registers what --exec needs beyond mlir-opt's registrations: the LLVM IR
// translations of the builtin and LLVM dialects, and the host target.
void prepareExec(mlir::DialectRegistry &registry);

// With `on`, each answer is followed on stderr by the seconds spent per stage so far.
void reportExecTimings(bool on);

class ExecService {
public:
  // optimizer: the pass manager of the driver's pipeline (for builtin.module).
  ExecService(mlir::MLIRContext &context,
              std::function<mlir::PassManager *()> optimizer);
  ~ExecService();

  // Answers one request; false (with a one-line error) if it is malformed.
  bool handle(llvm::StringRef request, std::string &response, std::string &error);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace loomfuzz
