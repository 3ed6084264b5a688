// Runs a TypeScript file with node, transpiling it (and any .ts file it
// requires) with the TypeScript package's single-file transpiler: types are
// stripped, not checked, as bun and deno do. Run as
//   node -e <this> -- <typescript package dir> <file> <name shown in errors> [args...]
// and the script sees process.argv as if run as `node <file> [args...]`.
"use strict";
const Module = require("module");
const path = require("path");
const fs = require("fs");

const [tsDir, file, shown] = process.argv.splice(1, 3);
process.argv.splice(1, 0, file);
const ts = require(tsDir);
if (process.setSourceMapsEnabled) process.setSourceMapsEnabled(true);

const compilerOptions = {
  module: ts.ModuleKind.CommonJS,
  target: ts.ScriptTarget.ES2022,
  esModuleInterop: true,
  inlineSourceMap: true,
};

// hasTopLevelAwait tells whether node awaits outside any function.
function hasTopLevelAwait(node) {
  if (ts.isFunctionLike(node) || ts.isClassLike(node)) return false;
  if (node.kind === ts.SyntaxKind.AwaitExpression) return true;
  if (ts.isForOfStatement(node) && node.awaitModifier) return true;
  return ts.forEachChild(node, (n) => (hasTopLevelAwait(n) ? true : undefined)) === true;
}

function transpile(source, filename, name, main) {
  const out = ts.transpileModule(source, { compilerOptions, fileName: filename, reportDiagnostics: true });
  const errors = (out.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (errors.length > 0) {
    for (const d of errors) {
      let where = name;
      if (d.file && d.start !== undefined) {
        const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
        where += ":" + (line + 1) + ":" + (character + 1);
      }
      process.stderr.write(where + ": error TS" + d.code + ": " + ts.flattenDiagnosticMessageText(d.messageText, "\n") + "\n");
    }
    process.exit(1);
  }
  let js = out.outputText;
  // CommonJS has no top-level await; the main script's body runs in an
  // async function instead (as node runs an ES module: a rejection exits 1).
  if (main && hasTopLevelAwait(ts.createSourceFile(filename, source, ts.ScriptTarget.ES2022))) {
    js = "(async () => {" + js + "\n})();";
  }
  return js;
}

function compile(module, filename, name, main) {
  module._compile(transpile(fs.readFileSync(filename, "utf8"), filename, name, main), filename);
}

for (const ext of [".ts", ".cts", ".mts"]) {
  Module._extensions[ext] = (module, filename) => compile(module, filename, filename, false);
}

const main = new Module(file, null);
main.id = ".";
main.filename = file;
main.paths = Module._nodeModulePaths(path.dirname(file));
process.mainModule = main;
Module._cache[file] = main;
compile(main, file, shown, true);
main.loaded = true;
