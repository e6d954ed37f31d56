// loomfuzz-exec-jit: the JIT side of the driver's --exec mode (loomfuzz-exec.h).
//
// BatchJit runs lowered modules (LLVM dialect, after the reference lowering)
// the way mlir-runner -O0 would, but in this process and for a whole batch at
// once: the lowered modules of a batch are moved into one module (absorb, each
// side's symbols prefixed r<k>_ / o<k>_), translated to LLVM IR and compiled
// in one go by one LLJIT kept for the process's life; each main is then called
// in turn and what it prints (printI64 / printComma / printNewline, the
// driver's own) is captured per call.  Why: one translation and one codegen
// per batch instead of one mlir-runner process per module is most of what
// judging in process gains.  The protocol, parsing, the pipeline and the
// lowering are loomfuzz-exec.cpp's.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/IntrusiveRefCntPtr.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llvm::orc {
class LLJIT;
class ResourceTracker;
} // namespace llvm::orc

namespace loomfuzz {

class BatchJit {
public:
  // One batch's compiled code: its mains by name; the code goes with it.
  struct Loaded {
    llvm::IntrusiveRefCntPtr<llvm::orc::ResourceTracker> tracker;
    std::map<std::string, void (*)()> mains;
    ~Loaded();
  };

  BatchJit();
  ~BatchJit();

  // Registers what the JIT needs: the LLVM IR translations of the builtin and
  // LLVM dialects, and the host target.
  static void prepare(mlir::DialectRegistry &registry);

  // Moves a module's operations into `into`, every defined symbol renamed
  // prefix + name (no prefix: kept); declarations are shared.
  static void absorb(mlir::ModuleOp module, mlir::ModuleOp into, mlir::SymbolTable &target,
                     const std::string &prefix);

  // Whether `symbols` has a callable `name` (a defined `void ()`): what a
  // buggy optimizer left of main is checked before anything calls it.
  static bool hasMain(mlir::SymbolTable &symbols, llvm::StringRef name);

  // Translates `module` to LLVM IR, compiles it and finds `mains` (functions
  // `void ()`); null with the reason in `detail` if any step fails.
  std::unique_ptr<Loaded> jit(mlir::ModuleOp module, const std::vector<std::string> &mains,
                              std::string &detail);

  // Calls a compiled main and captures what it prints.
  static void call(void (*main)(), std::string &output);

private:
  // The process's one JIT, made on first use: with --fork-server that is in a
  // worker (up to its retirement), never in the zygote.  Each batch's code is
  // added under its own resource tracker and removed after the batch: no
  // engine to build and tear down per batch, no platform (the modules have no
  // static constructors), and only the mains are looked up.
  std::unique_ptr<llvm::orc::LLJIT> lljit;

  llvm::Error ensureJit();
};

} // namespace loomfuzz
