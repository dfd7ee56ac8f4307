/**
 * The package's construct types (dist/construct.d.ts) are written by test/tools/build-package.ts,
 * partly by hand (the class's parts, typed by the aws-cdk-lib classes they expose). This holds
 * them to the real construct: the compiler checks that the real `CampaignReportExporter` is
 * assignable to the declared one, and that the declared and real `ExporterConfig` and props
 * accept the same values, so a renamed or retyped part fails here, not in a user's app.
 */
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { constructTypes } from '../tools/build-package.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The check of one declaration file, `./<name>.js` beside infra/exporter.ts. */
const checkSource = (name: string): string => `
import type * as Declared from './${name}.js';
import type { CampaignReportExporter, CampaignReportExporterProps } from './exporter.js';
import type { ExporterConfig } from './config.js';
import type { FunctionName } from './constructs/functions.js';

/** Compiles only when A and B accept the same values. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const ok = <T extends true>(): T | undefined => undefined;

export const construct: Declared.CampaignReportExporter = {} as CampaignReportExporter;
ok<Same<Declared.ExporterConfig, ExporterConfig>>();
ok<Same<Declared.CampaignReportExporterProps, CampaignReportExporterProps>>();
ok<Same<Declared.FunctionName, FunctionName>>();
`;

/**
 * The compiler's errors for each declaration text's check, each as one line; one program for
 * all (aws-cdk-lib's types are the cost). The files live in memory as if in infra/, so that the
 * repository's aws-cdk-lib resolves for both sides.
 */
function diagnostics(declarations: Record<string, string>): Record<string, string[]> {
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2023,
  };
  const files = new Map<string, string>();
  const checks: Record<string, string> = {};
  for (const [name, text] of Object.entries(declarations)) {
    files.set(`${ROOT}infra/__${name}.d.ts`, text);
    checks[name] = `${ROOT}infra/__${name}-check.ts`;
    files.set(checks[name], checkSource(`__${name}`));
  }
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (file) => files.has(file) || fileExists.call(host, file);
  host.readFile = (file) => files.get(file) ?? readFile.call(host, file);
  host.getSourceFile = (file, version, ...rest) => {
    const text = files.get(file);
    return text !== undefined
      ? ts.createSourceFile(file, text, version)
      : getSourceFile.call(host, file, version, ...rest);
  };
  const program = ts.createProgram(Object.values(checks), options, host);
  const found = ts.getPreEmitDiagnostics(program);
  return Object.fromEntries(
    Object.entries(checks).map(([name, check]) => [
      name,
      found
        .filter((d) => d.file?.fileName === check || d.file?.fileName === `${ROOT}infra/__${name}.d.ts`)
        .map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' ')),
    ]),
  );
}

describe("the package's construct types", () => {
  it('declare what the construct is: its parts, its config and props, its function names; a part renamed in them fails', () => {
    const declared = constructTypes();
    const renamed = declared.replace('readonly plan: {', 'readonly planning: {');
    expect(renamed).not.toBe(declared);

    const found = diagnostics({ declared, renamed });

    expect(found.declared).toEqual([]);
    expect(found.renamed!.join('\n')).toMatch(/planning/);
  }, 120_000);
});
