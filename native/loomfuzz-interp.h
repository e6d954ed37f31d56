// loomfuzz-interp: the IR executor of the driver's --exec mode (native/README.md,
// "The IR executor").
//
// It runs a module's `main` over MLIR's own IR, before any lowering: every
// integer is an APInt of its type's width (index: 64 bits) with a poison bit,
// every memref a buffer of such cells, and what `main` prints through
// printI64 / printComma / printNewline is captured as libmlir_c_runner_utils
// prints it (a poison value prints as "poison").  It knows the operations our
// grammars emit and the ones the optimizers under test make of them (arith,
// index, math's integer ops, scf, cf, memref, func, the llvm ops of the exec
// rendering, ub.poison); anything else is reported as unknown, never guessed,
// and the caller judges that program by the JIT instead.
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>

namespace loomfuzz {

enum class InterpStatus : uint32_t {
  Ok = 0,
  Unknown = 1,   // an operation (or type, or external call) it has no semantics for
  Undefined = 2, // immediate undefined behaviour: division by zero, branch on poison, ...
  Budget = 3,    // the step budget or the call depth ran out (a loop that does not end)
  NoMain = 4,    // no function main of type () -> ()
};

const char *interpStatusName(InterpStatus status);

struct InterpResult {
  InterpStatus status = InterpStatus::Ok;
  std::string output; // what main printed (up to where it stopped)
  std::string why;    // for every status but Ok: what and where (op name, location)
};

// Steps (operations executed) before a run is stopped as Budget: the wide
// programs execute some 10^4-10^5 operations; a loop that does not end stops
// here in well under a second.
constexpr uint64_t kInterpStepBudget = 20'000'000;

// Runs `module`'s main (it is not modified).
InterpResult interpret(mlir::ModuleOp module, uint64_t budget = kInterpStepBudget);

} // namespace loomfuzz
