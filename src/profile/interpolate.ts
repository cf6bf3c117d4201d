/**
 * `${VAR}` and `${VAR:-default}` in profile strings. The default may itself hold `${…}`
 * (`${WORKSPACE:-${CWD}}`). `$$` is a literal `$`. Pure: the variables are passed in.
 */
export type Variables = Readonly<Record<string, string | undefined>>;

export class InterpolationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InterpolationError';
  }
}

export function interpolate(input: string, vars: Variables): string {
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
      out += expand(input.slice(i + 2, end), vars);
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

function expand(body: string, vars: Variables): string {
  const match = /^([A-Za-z_][A-Za-z0-9_]*)(?::-([\s\S]*))?$/.exec(body);
  if (!match) throw new InterpolationError(`"\${${body}}" is not \${NAME} or \${NAME:-default}`);
  const [, name, fallback] = match as unknown as [string, string, string | undefined];
  const value = vars[name];
  // As in the shell: `${VAR}` is '' when VAR is set but empty; `${VAR:-d}` treats empty as unset.
  if (fallback !== undefined) return value !== undefined && value !== '' ? value : interpolate(fallback, vars);
  if (value !== undefined) return value;
  throw new InterpolationError(`environment variable ${name} is not set and has no default`);
}

/** Applies `interpolate` to every string in a parsed YAML tree; errors carry the field path. */
export function interpolateTree(
  value: unknown,
  vars: Variables,
  onError: (path: (string | number)[], message: string) => void,
  path: (string | number)[] = [],
): unknown {
  if (typeof value === 'string') {
    try {
      return interpolate(value, vars);
    } catch (error) {
      onError(path, (error as Error).message);
      return value;
    }
  }
  if (Array.isArray(value)) return value.map((v, i) => interpolateTree(v, vars, onError, [...path, i]));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, interpolateTree(v, vars, onError, [...path, k])]),
    );
  }
  return value;
}
