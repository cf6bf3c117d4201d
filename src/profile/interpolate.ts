import { SANDBOX_OPENER, SANDBOX_PREFIX, SANDBOX_VALUE_NAMES, isSandboxReference } from './sandbox-values.js';

/**
 * `${VAR}` and `${VAR:-default}` in profile strings. The default may itself hold `${…}`
 * (`${WORKSPACE:-${CWD}}`). `$$` is a literal `$`. Pure: the variables are passed in.
 *
 * `${sandbox:NAME}` is not a host variable: where it is allowed (`sandboxValues`), it is left as
 * written, to be filled in from the sandbox's own values (sandbox-values.ts); the host's
 * variables are never consulted for it. Anywhere else, or with an unknown NAME, it is an error.
 * So that a reference in the result is always one the profile wrote, a result holding
 * `${sandbox:` made otherwise (`$${sandbox:…}`, a variable's value) is refused too.
 */
export type Variables = Readonly<Record<string, string | undefined>>;

export class InterpolationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InterpolationError';
  }
}

/** `${NAME}` of a variable that is not set, without a default: which one. */
export class UnsetVariableError extends InterpolationError {
  constructor(readonly variable: string) {
    super(`environment variable ${variable} is not set and has no default`);
    this.name = 'UnsetVariableError';
  }
}

export interface InterpolateOptions {
  /** `${sandbox:NAME}` may appear here (and is kept). Default false. */
  sandboxValues?: boolean;
  /** Told of each `${NAME:-default}` whose default was used, with the default's value. */
  onDefault?: (name: string, value: string) => void;
}

export function interpolate(input: string, vars: Variables, options: InterpolateOptions = {}): string {
  const kept = { count: 0 };
  const out = interpolateIn(input, vars, options, kept);
  if (out.split(SANDBOX_OPENER).length - 1 > kept.count) {
    throw new InterpolationError(
      `"${SANDBOX_OPENER}" may only be written as a sandbox value, not made by $$ or a variable`,
    );
  }
  return out;
}

function interpolateIn(input: string, vars: Variables, options: InterpolateOptions, kept: { count: number }): string {
  let out = '';
  let i = 0;
  while (i < input.length) {
    const ch = input[i];
    if (ch === '$' && input[i + 1] === '$') {
      out += '$';
      i += 2;
    } else if (ch === '$' && input[i + 1] === '{') {
      const end = findClosingBrace(input, i + 2);
      if (end < 0) throw new InterpolationError(`unclosed "\${" in "${input}"`);
      out += expand(input.slice(i + 2, end), vars, options, kept);
      i = end + 1;
    } else {
      out += ch;
      i += 1;
    }
  }
  return out;
}

function findClosingBrace(input: string, from: number): number {
  let depth = 1;
  for (let j = from; j < input.length; j++) {
    if (input[j] === '{') depth++;
    else if (input[j] === '}' && --depth === 0) return j;
  }
  return -1;
}

function expand(body: string, vars: Variables, options: InterpolateOptions, kept: { count: number }): string {
  if (body.startsWith(SANDBOX_PREFIX)) return keepSandboxValue(body.slice(SANDBOX_PREFIX.length), options, kept);
  const match = /^([A-Za-z_][A-Za-z0-9_]*)(?::-([\s\S]*))?$/.exec(body);
  if (!match) throw new InterpolationError(`"\${${body}}" is not \${NAME} or \${NAME:-default}`);
  const [, name, fallback] = match as unknown as [string, string, string | undefined];
  const value = vars[name];
  // As in the shell: `${VAR}` is '' when VAR is set but empty; `${VAR:-d}` treats empty as unset.
  if (fallback !== undefined) {
    if (value !== undefined && value !== '') return value;
    const used = interpolateIn(fallback, vars, options, kept);
    options.onDefault?.(name, used);
    return used;
  }
  if (value !== undefined) return value;
  throw new UnsetVariableError(name);
}

function keepSandboxValue(name: string, options: InterpolateOptions, kept: { count: number }): string {
  if (!isSandboxReference(name)) {
    throw new InterpolationError(
      `unknown sandbox value "\${sandbox:${name}}": expected one of ${SANDBOX_VALUE_NAMES.join(', ')}, ` +
        'or mount.<name> (the target of the mount with that name)',
    );
  }
  if (!options.sandboxValues) {
    throw new InterpolationError(`"\${sandbox:${name}}" is only allowed in server.args and env`);
  }
  kept.count += 1;
  return `\${sandbox:${name}}`;
}

/**
 * Applies `interpolate` to every string in a parsed YAML tree; errors carry the field path.
 * `sandboxValuesAt` says at which paths `${sandbox:NAME}` may appear (default: nowhere).
 * A tree that contains itself (a YAML alias inside its own anchor) is an error where it does,
 * and is cut there (`null`): the result is always a tree.
 */
export function interpolateTree(
  value: unknown,
  vars: Variables,
  onError: (path: (string | number)[], message: string, error: Error) => void,
  sandboxValuesAt: (path: readonly (string | number)[]) => boolean = () => false,
  path: (string | number)[] = [],
  ancestors = new Set<object>(),
): unknown {
  if (typeof value === 'string') {
    try {
      return interpolate(value, vars, { sandboxValues: sandboxValuesAt(path) });
    } catch (error) {
      onError(path, (error as Error).message, error as Error);
      return value;
    }
  }
  if (value === null || typeof value !== 'object') return value;
  if (ancestors.has(value)) {
    const message = 'contains itself (a YAML alias inside its own anchor)';
    onError(path, message, new InterpolationError(message));
    return null;
  }
  ancestors.add(value);
  const inner = (v: unknown, key: string | number): unknown =>
    interpolateTree(v, vars, onError, sandboxValuesAt, [...path, key], ancestors);
  try {
    if (Array.isArray(value)) return value.map(inner);
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, inner(v, k)]));
  } finally {
    ancestors.delete(value);
  }
}

/**
 * The host variables a profile tree reads when it is loaded: every `${NAME}`, in defaults too
 * (`${A:-${B}}` reads both), sorted. `$$` and `${sandbox:…}` read none. Pure.
 */
export function referencedVariables(tree: unknown): string[] {
  const names = new Set<string>();
  // Every name is '' (set, empty): `${A}` goes on past it, `${A:-…}` reads its default too.
  const recording = new Proxy<Record<string, string>>(
    {},
    {
      get: (_, name) => {
        if (typeof name === 'string') names.add(name);
        return '';
      },
    },
  );
  interpolateTree(
    tree,
    recording,
    () => undefined,
    () => true,
  );
  return [...names].sort();
}
