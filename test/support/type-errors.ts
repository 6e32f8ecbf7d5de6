/**
 * Compiles files with the project's tsconfig.json and returns their type errors, each with its
 * file and line: for tests whose assertions are types (expectTypeOf, `@ts-expect-error`),
 * so that `vitest run` fails on them as `npm run typecheck` does.
 */

import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CONFIG = fileURLToPath(new URL('../../tsconfig.json', import.meta.url));

export function typeErrors(...files: string[]): string[] {
  const { config } = ts.readConfigFile(CONFIG, (path) => ts.sys.readFile(path));
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, ROOT);
  const program = ts.createProgram(files, { ...options, noEmit: true });
  const diagnostics = files.flatMap((file) => {
    const source = program.getSourceFile(file);
    return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
  });
  return diagnostics.map((diagnostic) => {
    const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (diagnostic.file === undefined || diagnostic.start === undefined) return text;
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    const where = diagnostic.file.text.split('\n')[line].trim();
    return `${basename(diagnostic.file.fileName)} line ${line + 1} (${where}): ${text}`;
  });
}
