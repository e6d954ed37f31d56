// loomfuzz-exec-jit: a batch's lowered modules compiled and run in this
// process (loomfuzz-exec-jit.h; native/README.md, "Execution in process").

#include "loomfuzz-exec-jit.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/Analysis/ValueTracking.h"
#include "llvm/ExecutionEngine/Orc/AbsoluteSymbols.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>

namespace {

// What the executed code prints, per call of a main.  A runaway loop that
// prints stops growing it at the cap (the harness's timeout ends the run).
std::string capture;
constexpr size_t kCaptureCap = 64u << 20;

// The printers of libmlir_c_runner_utils.so (CRunnerUtils.cpp), into `capture`.
extern "C" void loomfuzzPrintI64(int64_t value) {
  if (capture.size() < kCaptureCap)
    capture += std::to_string(value);
}
extern "C" void loomfuzzPrintComma() {
  if (capture.size() < kCaptureCap)
    capture += ", ";
}
extern "C" void loomfuzzPrintNewline() {
  if (capture.size() < kCaptureCap)
    capture += '\n';
}

// The one LLVM IR rewrite before codegen: an extractvalue of a value that an
// insertvalue chain put there is that value (LLVM's FindInsertedValue), and
// insertvalues left without a use go.  The lowering passes every memref as
// such chains (its descriptor); FastISel, the codegen of -O0, does not select
// insertvalue and hands the whole block to SelectionDAG, which costs most of
// the time of a JIT.  No arithmetic is touched: nothing that an optimizer
// under test could also get wrong.
void forwardInsertedValues(llvm::Module &module) {
  for (llvm::Function &function : module) {
    for (llvm::BasicBlock &block : function) {
      for (llvm::Instruction &inst : llvm::make_early_inc_range(block)) {
        auto *extract = llvm::dyn_cast<llvm::ExtractValueInst>(&inst);
        if (!extract)
          continue;
        if (llvm::Value *value =
                llvm::FindInsertedValue(extract->getAggregateOperand(), extract->getIndices())) {
          if (value == extract)
            continue;
          extract->replaceAllUsesWith(value);
          extract->eraseFromParent();
        }
      }
      // dead insertvalue chains, from their last link back
      bool erased = true;
      while (erased) {
        erased = false;
        for (llvm::Instruction &inst : llvm::make_early_inc_range(llvm::reverse(block))) {
          if (llvm::isa<llvm::InsertValueInst>(inst) && inst.use_empty()) {
            inst.eraseFromParent();
            erased = true;
          }
        }
      }
    }
  }
}

// A function without a body (the printers): shared by every module of a batch.
bool isDeclaration(mlir::Operation *op) {
  auto function = llvm::dyn_cast<mlir::FunctionOpInterface>(op);
  return function && function.isExternal();
}

} // namespace

namespace loomfuzz {

BatchJit::Loaded::~Loaded() {
  if (tracker)
    llvm::consumeError(tracker->remove());
}

BatchJit::BatchJit() = default;

BatchJit::~BatchJit() = default;

void BatchJit::prepare(mlir::DialectRegistry &registry) {
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::InitializeNativeTargetAsmParser();
}

void BatchJit::absorb(mlir::ModuleOp module, mlir::ModuleOp into, mlir::SymbolTable &target,
                      const std::string &prefix) {
  std::vector<mlir::Operation *> ops;
  for (mlir::Operation &op : module.getBody()->getOperations())
    ops.push_back(&op);
  if (!prefix.empty()) {
    // Every definition renamed, then every reference in one walk (SymbolTable::rename
    // walks the whole module once per symbol).
    llvm::DenseMap<mlir::StringAttr, mlir::StringAttr> renamed;
    for (mlir::Operation *op : ops) {
      auto name = op->getAttrOfType<mlir::StringAttr>(mlir::SymbolTable::getSymbolAttrName());
      if (name && !isDeclaration(op)) {
        auto to = mlir::StringAttr::get(module.getContext(), prefix + name.getValue().str());
        renamed[name] = to;
        op->setAttr(mlir::SymbolTable::getSymbolAttrName(), to);
      }
    }
    mlir::AttrTypeReplacer replacer;
    replacer.addReplacement([&](mlir::SymbolRefAttr ref) -> std::optional<mlir::Attribute> {
      auto found = renamed.find(ref.getRootReference());
      if (found == renamed.end())
        return std::nullopt;
      return mlir::SymbolRefAttr::get(found->second, ref.getNestedReferences());
    });
    replacer.recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true, /*replaceLocs=*/false,
                                          /*replaceTypes=*/false);
  }
  for (mlir::Operation *op : ops) {
    auto name = op->getAttrOfType<mlir::StringAttr>(mlir::SymbolTable::getSymbolAttrName());
    if (name && isDeclaration(op) && target.lookup(name.getValue())) {
      op->erase();
      continue;
    }
    op->remove();
    into.getBody()->push_back(op);
    if (name)
      target.insert(op);
  }
}

bool BatchJit::hasMain(mlir::SymbolTable &symbols, llvm::StringRef name) {
  auto function = symbols.lookup<mlir::LLVM::LLVMFuncOp>(name);
  if (!function || function.isExternal())
    return false;
  mlir::LLVM::LLVMFunctionType type = function.getFunctionType();
  return type.getNumParams() == 0 && !type.isVarArg() &&
         llvm::isa<mlir::LLVM::LLVMVoidType>(type.getReturnType());
}

llvm::Error BatchJit::ensureJit() {
  if (lljit)
    return llvm::Error::success();
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return builder.takeError();
  // -O0 as mlir-runner -O0 runs: no LLVM IR passes; codegen without
  // optimisation (FastISel where it applies).
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::None);
  auto created = llvm::orc::LLJITBuilder()
                     .setJITTargetMachineBuilder(std::move(*builder))
                     .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
                     .create();
  if (!created)
    return created.takeError();
  std::unique_ptr<llvm::orc::LLJIT> made = std::move(*created);
  llvm::orc::SymbolMap printers;
  auto add = [&](const char *name, void *address) {
    printers[made->mangleAndIntern(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                                              llvm::JITSymbolFlags::Exported};
  };
  add("printI64", reinterpret_cast<void *>(&loomfuzzPrintI64));
  add("printComma", reinterpret_cast<void *>(&loomfuzzPrintComma));
  add("printNewline", reinterpret_cast<void *>(&loomfuzzPrintNewline));
  if (llvm::Error error =
          made->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(printers))))
    return error;
  lljit = std::move(made);
  return llvm::Error::success();
}

std::unique_ptr<BatchJit::Loaded> BatchJit::jit(mlir::ModuleOp module,
                                                const std::vector<std::string> &mains,
                                                std::string &detail) {
  llvm::raw_string_ostream stream(detail);
  mlir::ScopedDiagnosticHandler handler(module.getContext(), [&](mlir::Diagnostic &diag) {
    stream << diag.getLocation() << ": " << diag << "\n";
    return mlir::success();
  });
  if (llvm::Error error = ensureJit()) {
    stream << llvm::toString(std::move(error)) << "\n";
    return nullptr;
  }
  auto llvmContext = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(module, *llvmContext, "loomfuzz-exec");
  if (!llvmModule) {
    stream << "cannot translate the lowered module to LLVM IR\n";
    return nullptr;
  }
  llvmModule->setDataLayout(lljit->getDataLayout());
  llvmModule->setTargetTriple(lljit->getTargetTriple());
  forwardInsertedValues(*llvmModule);
  auto loaded = std::make_unique<Loaded>();
  loaded->tracker = lljit->getMainJITDylib().createResourceTracker();
  if (llvm::Error error = lljit->addIRModule(
          loaded->tracker, llvm::orc::ThreadSafeModule(std::move(llvmModule),
                                                       llvm::orc::ThreadSafeContext(
                                                           std::move(llvmContext))))) {
    stream << llvm::toString(std::move(error)) << "\n";
    return nullptr;
  }
  // One lookup for every main: the module is compiled here, under the
  // caller's "jit" marker, not inside the first call.
  llvm::orc::SymbolLookupSet names;
  for (const std::string &name : mains)
    names.add(lljit->mangleAndIntern(name));
  auto found = lljit->getExecutionSession().lookup(
      llvm::orc::makeJITDylibSearchOrder(&lljit->getMainJITDylib()), std::move(names));
  if (!found) {
    stream << llvm::toString(found.takeError()) << "\n";
    return nullptr;
  }
  for (const std::string &name : mains)
    loaded->mains[name] =
        (*found)[lljit->mangleAndIntern(name)].getAddress().toPtr<void (*)()>();
  return loaded;
}

void BatchJit::call(void (*main)(), std::string &output) {
  capture.clear();
  main();
  output = std::move(capture);
  capture.clear();
}

} // namespace loomfuzz
