/**
 * The wire types and the route schemas cannot drift apart: wire-schemas.types.ts states, for
 * each body the server reads or sends, that the type its schema describes is the wire type,
 * and this test compiles it. A failure names the pair that differs.
 */

import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const TYPES = fileURLToPath(new URL('./wire-schemas.types.ts', import.meta.url));
const CONFIG = fileURLToPath(new URL('../../tsconfig.json', import.meta.url));

function compile(file: string): string[] {
  const { config } = ts.readConfigFile(CONFIG, (path) => ts.sys.readFile(path));
  const { options } = ts.parseJsonConfigFileContent(
    config,
    ts.sys,
    fileURLToPath(new URL('../..', import.meta.url)),
  );
  const program = ts.createProgram([file], { ...options, noEmit: true });
  const source = program.getSourceFile(file);
  const diagnostics = [
    ...program.getSyntacticDiagnostics(source),
    ...program.getSemanticDiagnostics(source),
  ];
  return diagnostics.map((diagnostic) => {
    const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (diagnostic.file === undefined || diagnostic.start === undefined) return text;
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    const where = diagnostic.file.text.split('\n')[line].trim();
    return `line ${line + 1} (${where}): ${text}`;
  });
}

describe('the wire types', () => {
  it('are exactly the types the route schemas describe, request and response bodies', () => {
    expect(compile(TYPES)).toEqual([]);
  });
});
