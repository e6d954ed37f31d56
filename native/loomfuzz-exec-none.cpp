// loomfuzz-exec-none: the --exec mode of a driver built for an older MLIR
// release (native/README.md, "One driver per release").  The in-process
// differential oracle executes with the reference toolchain's own MLIR (22),
// so a driver linked against another release only optimizes: --exec answers
// with a one-line error and the harness judges that release through the
// process path.

#include "loomfuzz-exec.h"

namespace loomfuzz {

void prepareExec(mlir::DialectRegistry &) {}

void reportExecTimings(bool) {}

struct ExecService::Impl {};

ExecService::ExecService(mlir::MLIRContext &, std::function<mlir::PassManager *()>) {}

ExecService::~ExecService() = default;

bool ExecService::handle(llvm::StringRef, std::string &, std::string &error) {
  error = "--exec is not built into this driver (an MLIR release other than the "
          "reference toolchain's: the process path executes it)";
  return false;
}

} // namespace loomfuzz
