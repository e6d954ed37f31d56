// loomfuzz-mlir-driver: one long-lived MLIR process for many programs.
//
// It registers what mlir-opt registers (all upstream dialects, extensions and
// passes; with -DLOOMFUZZ_WITH_LOOM also loom's Dataflow, Fabric and Loom
// dialects and its raising/lowering passes), keeps one MLIRContext, and then
// answers programs framed on stdin with results framed on stdout.  Its
// command line takes the pass flags mlir-opt takes (--pass-pipeline=...,
// --canonicalize, --loom-lower-for-to-graph, ...) plus:
//   --allow-unregistered-dialect   as in mlir-opt
//   --emit-output                  send the printed module back on success
//   --exec                         execution mode: each program is a batch of
//                                  exec modules, run before and after the
//                                  pipeline in process (loomfuzz-exec.h)
//
// Protocol (all integers unsigned 32-bit little-endian; see native/README.md):
//   driver -> harness, once after start-up:  "LFD1"
//   harness -> driver, per program:          u32 length, the program's bytes
//   driver -> harness, per program:          "LFR1", u32 sequence number
//                                            (1 for the first program since
//                                            start), u32 status (0: what
//                                            mlir-opt reports with exit status
//                                            0; 1: with exit status 1), u32 n +
//                                            n bytes of diagnostics (as
//                                            mlir-opt prints them on stderr,
//                                            buffer "<stdin>"), u32 m + m bytes
//                                            of the printed module (m = 0
//                                            without --emit-output or on
//                                            failure)
//   EOF on stdin: exit 0.
// With --fork-server the process that starts is a zygote: it initialises
// (registrations, context, pass manager), sends "LFZ1", and then forks one
// worker after another.  Each worker is a fresh copy of the initialised
// process: it sends "LFC1" + u32 pid, then answers programs as above (its
// sequence numbers start at 1).  A program of length 0xFFFFFFFF retires the
// worker (it exits 0).  When a worker ends (crash, retirement, a kill by the
// harness on a timeout) the zygote sends "LFX1" + u32 wait status (as
// waitpid(2) gives it) and forks the next one; a worker that sees EOF exits
// 75 and the zygote exits with it.  A crash then costs a fork, not an exec
// and a second initialisation, and the first program of a worker runs in a
// process that has run no other program: the harness's fresh confirmation.
// A crash (assertion, signal, report_fatal_error) is not answered: LLVM's
// signal handlers print the usual stack dump on stderr and the process dies,
// exactly as mlir-opt would.
//
// Between programs the parsed module and the diagnostic handler are dropped;
// the context (uniqued types and attributes, loaded dialects) and the pass
// manager (its passes and their initialisation) are kept, as a long-running
// compiler service would keep them.  Multithreading is off (one program at a
// time; the harness runs several drivers for parallelism).

#include "loomfuzz-exec.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/ParseUtilities.h"

#ifdef LOOMFUZZ_WITH_LOOM
#include "Dataflow/IR/DataflowDialect.h"
#include "Dataflow/Transforms/DataflowRewrite.h"
#include "Fabric/IR/FabricDialect.h"
#include "Frontend/IR/LoomDialect.h"
#include "Frontend/Lowering/Passes.h"
#include "Frontend/Raising/Passes.h"
#endif

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

// AFL++'s runtime, linked in by afl-clang-fast++ (which defines
// __AFL_HAVE_MANUAL_CONTROL): __afl_coverage_discard() zeroes the edge map
// the runtime attached (entry 0 is then set to 1).  Not __afl_area_ptr
// itself: AFL++'s pass declares that global in every module it instruments,
// and a declaration here would clash with it.
#ifdef __AFL_HAVE_MANUAL_CONTROL
extern "C" void __afl_coverage_discard(void);
#endif

namespace {

llvm::cl::opt<bool> allowUnregisteredDialects(
    "allow-unregistered-dialect",
    llvm::cl::desc("Allow operations of unregistered dialects"),
    llvm::cl::init(false));
llvm::cl::opt<bool> emitOutput(
    "emit-output",
    llvm::cl::desc("Send the printed module back with each successful result"),
    llvm::cl::init(false));
llvm::cl::opt<bool> execMode(
    "exec",
    llvm::cl::desc("Execute exec modules before and after the pipeline (loomfuzz-exec.h)"),
    llvm::cl::init(false));
llvm::cl::opt<bool> execTimings(
    "exec-timings",
    llvm::cl::desc("With --exec: seconds per stage on stderr after each answer"),
    llvm::cl::init(false));
llvm::cl::opt<bool> forkServer(
    "fork-server",
    llvm::cl::desc("Fork a fresh worker from the initialised process for each run of programs"),
    llvm::cl::init(false));

constexpr uint32_t kMaxProgram = 256u << 20;
constexpr uint32_t kRetire = 0xFFFFFFFFu;
constexpr int kWorkerSawEOF = 75;

// The protocol's file descriptors: private copies of stdin/stdout, so that
// anything a pass prints on stdout lands on stderr instead of in a frame.
int protocolIn = -1;
int protocolOut = -1;

bool readAll(int fd, void *buffer, size_t size) {
  char *p = static_cast<char *>(buffer);
  while (size > 0) {
    ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void writeAll(const void *buffer, size_t size) {
  const char *p = static_cast<const char *>(buffer);
  while (size > 0) {
    ssize_t n = ::write(protocolOut, p, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      std::_Exit(0); // the harness is gone
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void appendU32(std::string &out, uint32_t v) {
  char b[4] = {char(v & 0xff), char((v >> 8) & 0xff), char((v >> 16) & 0xff),
               char((v >> 24) & 0xff)};
  out.append(b, 4);
}

uint32_t decodeU32(const unsigned char *b) {
  return uint32_t(b[0]) | (uint32_t(b[1]) << 8) | (uint32_t(b[2]) << 16) |
         (uint32_t(b[3]) << 24);
}

// Die with the harness: SIGKILL when the parent goes away, and a check for a
// parent that died before prctl took effect.
void followParent() {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  pid_t expected = 1;
  if (const char *env = std::getenv("LOOMFUZZ_PARENT_PID"))
    expected = static_cast<pid_t>(std::atol(env));
  pid_t parent = ::getppid();
  if (parent == 1 || (expected > 1 && parent != expected))
    std::_Exit(0);
}

// AFL++ persistent mode clears the map before each iteration (__AFL_LOOP);
// so does this, right after a program arrived, so that the edges of reading
// it and of the previous iteration's tail are not counted for it.
void clearCoverageMap() {
  static const bool attached = std::getenv("__AFL_SHM_ID") != nullptr;
#ifdef __AFL_HAVE_MANUAL_CONTROL
  if (attached)
    __afl_coverage_discard();
#else
  (void)attached;
#endif
}

// The zygote's loop (--fork-server): returns in each worker, never in the zygote.
void serveForks() {
  writeAll("LFZ1", 4);
  for (;;) {
    pid_t child = ::fork();
    if (child < 0) {
      llvm::errs() << "loomfuzz-mlir-driver: fork failed: " << std::strerror(errno) << "\n";
      std::_Exit(2);
    }
    if (child == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() == 1)
        std::_Exit(0);
      ::setpgid(0, 0); // its own group: a timeout kills the worker and its children only
      return;
    }
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == kWorkerSawEOF)
      std::_Exit(0);
    std::string frame = "LFX1";
    appendU32(frame, static_cast<uint32_t>(status));
    writeAll(frame.data(), frame.size());
  }
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv); // stack dumps on crashes, as in mlir-opt
  followParent();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllPasses();
#ifdef LOOMFUZZ_WITH_LOOM
  registry.insert<::fabric::FabricDialect, ::dataflow::DataflowDialect,
                  ::loom::LoomDialect>();
  loom::raising::registerRaisingPasses();
  loom::lowering::registerLoweringPasses();
  dataflow::registerDataflowTransformsPasses();
#endif

  loomfuzz::prepareExec(registry); // cheap; only --exec uses it

  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  // Built after the passes are registered: it offers one flag per pass.
  mlir::PassPipelineCLParser passPipeline("", "Compiler passes to run", "p");
  llvm::cl::ParseCommandLineOptions(
      argc, argv, "loom-fuzz persistent MLIR driver (framed programs on stdin)\n");

  protocolIn = ::dup(STDIN_FILENO);
  protocolOut = ::dup(STDOUT_FILENO);
  int devnull = ::open("/dev/null", O_RDONLY);
  if (protocolIn < 0 || protocolOut < 0 || devnull < 0) {
    llvm::errs() << "loomfuzz-mlir-driver: cannot set up its file descriptors\n";
    return 2;
  }
  ::dup2(devnull, STDIN_FILENO);
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  ::close(devnull);

  // No thread pool: a fork-server worker must not inherit a pool without its threads.
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.allowUnregisteredDialects(allowUnregisteredDialects);

  // The pass manager is built once, for the top-level op mlir-opt's implicit
  // module gives (builtin.module), and again only if a program's top-level op
  // is another one.  An invalid pipeline stops the driver before its LFD1,
  // with the error on stderr, as mlir-opt stops before reading its input.
  auto buildPassManager = [&](mlir::OperationName anchor) {
    auto pm = std::make_unique<mlir::PassManager>(
        &context, anchor.getStringRef(), mlir::OpPassManager::Nesting::Implicit);
    auto errorHandler = [&](const llvm::Twine &message) {
      return mlir::emitError(mlir::UnknownLoc::get(&context)) << message;
    };
    if (mlir::failed(mlir::applyPassManagerCLOptions(*pm)) ||
        mlir::failed(passPipeline.addToPipeline(*pm, errorHandler)))
      pm.reset();
    return pm;
  };
  mlir::OperationName pmAnchor("builtin.module", &context);
  std::unique_ptr<mlir::PassManager> pm = buildPassManager(pmAnchor);
  if (!pm) {
    llvm::errs() << "loomfuzz-mlir-driver: invalid pass pipeline\n";
    return 1;
  }

  loomfuzz::reportExecTimings(execTimings);
  loomfuzz::ExecService exec(context, [&]() -> mlir::PassManager * {
    if (!pm || pmAnchor.getStringRef() != "builtin.module") {
      pmAnchor = mlir::OperationName("builtin.module", &context);
      pm = buildPassManager(pmAnchor);
    }
    return pm.get();
  });

  if (forkServer) {
    serveForks(); // returns in a fresh worker
    std::string hello = "LFC1";
    appendU32(hello, static_cast<uint32_t>(::getpid()));
    writeAll(hello.data(), hello.size());
  } else {
    writeAll("LFD1", 4);
  }
  std::string program;
  uint32_t sequence = 0;
  for (;;) {
    unsigned char header[4];
    if (!readAll(protocolIn, header, 4))
      std::_Exit(forkServer ? kWorkerSawEOF : 0); // EOF: the harness is done (or gone)
    uint32_t length = decodeU32(header);
    if (forkServer && length == kRetire)
      std::_Exit(0);
    if (length > kMaxProgram) {
      llvm::errs() << "loomfuzz-mlir-driver: protocol error: a program of "
                   << length << " bytes (limit " << kMaxProgram << ")\n";
      return 2;
    }
    program.resize(length);
    if (length && !readAll(protocolIn, program.data(), length))
      std::_Exit(forkServer ? kWorkerSawEOF : 0);
    ++sequence;
    clearCoverageMap();

    std::string diagnostics, output;
    bool ok = false;
    if (execMode) {
      ok = exec.handle(program, output, diagnostics);
      if (!ok)
        diagnostics = "loomfuzz-mlir-driver: " + diagnostics + "\n";
    } else {
      llvm::raw_string_ostream diagStream(diagnostics);
      auto sourceMgr = std::make_shared<llvm::SourceMgr>();
      sourceMgr->AddNewSourceBuffer(
          llvm::MemoryBuffer::getMemBufferCopy(program, "<stdin>"), llvm::SMLoc());
      mlir::SourceMgrDiagnosticHandler handler(*sourceMgr, &context, diagStream);
      mlir::FallbackAsmResourceMap fallbackResourceMap;
      mlir::ParserConfig config(&context, /*verifyAfterParse=*/true,
                                &fallbackResourceMap);
      mlir::OwningOpRef<mlir::Operation *> op =
          mlir::parseSourceFileForTool(sourceMgr, config, /*insertImplicitModule=*/true);
      if (op) {
        if (!pm || op.get()->getName() != pmAnchor) {
          pmAnchor = op.get()->getName();
          pm = buildPassManager(pmAnchor);
        }
        if (pm && mlir::succeeded(pm->run(op.get()))) {
          ok = true;
          if (emitOutput) {
            llvm::raw_string_ostream outStream(output);
            mlir::AsmState asmState(op.get(), mlir::OpPrintingFlags(),
                                    /*locationMap=*/nullptr, &fallbackResourceMap);
            op.get()->print(outStream, asmState);
            outStream << '\n';
          }
        }
      }
    } // the module and the handler go here; the context stays

    std::string frame = "LFR1";
    appendU32(frame, sequence);
    appendU32(frame, ok ? 0 : 1);
    appendU32(frame, static_cast<uint32_t>(diagnostics.size()));
    frame += diagnostics;
    appendU32(frame, static_cast<uint32_t>(output.size()));
    frame += output;
    writeAll(frame.data(), frame.size());
  }
}
