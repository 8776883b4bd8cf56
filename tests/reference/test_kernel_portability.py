"""Constructs of kernels/**/*.cl that PoCL (this machine, CI) builds but NVIDIA's OpenCL C 1.2
compiler refuses, so that no local test catches them: a GPU run of 2026-11-22 found every peak
program refused for a variadic macro ("variadic macros not supported in OpenCL"). Checked on
the source text, comments and strings removed:
- no variadic macro (`...` in a #define's parameters, __VA_ARGS__);
- a file that uses `double` enables cl_khr_fp64 itself (a program may be one file alone);
- no program-scope variable other than `constant` (OpenCL C 1.2 allows no other);
- no `local` declaration outside a kernel's body (1.2 allows them only at kernel scope), checked
  as: a non-kernel function declares no `local` variable (pointer parameters are fine).
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
KERNELS = sorted((ROOT / "kernels").rglob("*.cl"))


def code_of(path):
    """The source with comments and string literals blanked (line structure kept)."""
    src = path.read_text()
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src[i] == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + " " * max(0, j - i - 1))
            i = j + 1
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def logical_lines(code):
    """Lines with backslash continuations joined."""
    return code.replace("\\\n", " ").split("\n")


def test_kernels_found():
    assert len(KERNELS) >= 5, KERNELS


def test_no_variadic_macros():
    bad = []
    for p in KERNELS:
        for ln in logical_lines(code_of(p)):
            m = re.match(r"\s*#\s*define\s+\w+\(([^)]*)\)", ln)
            if (m and "..." in m.group(1)) or "__VA_ARGS__" in ln:
                bad.append(f"{p.relative_to(ROOT)}: {ln.strip()[:80]}")
    assert not bad, "variadic macros (NVIDIA's OpenCL C 1.2 refuses them):\n" + "\n".join(bad)


def test_double_needs_fp64_pragma():
    bad = []
    for p in KERNELS:
        code = code_of(p)
        if re.search(r"\bdouble\d*\b", code) and not re.search(
                r"#\s*pragma\s+OPENCL\s+EXTENSION\s+cl_khr_fp64\s*:\s*enable", code):
            bad.append(str(p.relative_to(ROOT)))
    assert not bad, "files using double without enabling cl_khr_fp64: " + ", ".join(bad)


def top_level_statements(code):
    """(text, is_function) of every top-level declaration, preprocessor lines dropped."""
    code = "\n".join(ln for ln in logical_lines(code) if not ln.lstrip().startswith("#"))
    out, depth, start, in_type = [], 0, 0, False
    for i, ch in enumerate(code):
        if ch == "{":
            if depth == 0:
                head = code[start:i].strip()
                # a type's members and an initialiser (= {...}) are no function body
                in_type = bool(re.match(r"(typedef|struct|enum|union)\b", head))
                if not in_type and not head.endswith("="):
                    out.append((head, True, i))
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and not in_type:
                start = i + 1
        elif ch == ";" and depth == 0:
            if not in_type:
                out.append((code[start:i].strip(), False, i))
            in_type = False
            start = i + 1
    return out, code


def test_program_scope_variables_are_constant():
    bad = []
    for p in KERNELS:
        stmts, _ = top_level_statements(code_of(p))
        for text, is_function, _ in stmts:
            if is_function or not text or re.match(r"(typedef|struct|enum|union)\b", text):
                continue
            if "(" in text.split("=")[0]:  # a function declaration
                continue
            if not re.match(r"(__)?constant\b", text):
                bad.append(f"{p.relative_to(ROOT)}: {text[:80]}")
    assert not bad, "program-scope variables that are not constant:\n" + "\n".join(bad)


def function_bodies(code):
    """(head, body) of every top-level function definition."""
    stmts, flat = top_level_statements(code)
    out = []
    for head, is_function, i in stmts:
        if not is_function:
            continue
        depth, j = 0, i
        while j < len(flat):
            depth += {"{": 1, "}": -1}.get(flat[j], 0)
            if depth == 0:
                break
            j += 1
        out.append((head, flat[i:j + 1]))
    return out


def test_local_variables_only_in_kernels():
    bad = []
    for p in KERNELS:
        for head, body in function_bodies(code_of(p)):
            if re.search(r"\b(__)?kernel\b", head):
                continue
            for m in re.finditer(r"\b(__)?local\s+[\w\s]+?\b\w+\s*(\[|;|=)", body):
                bad.append(f"{p.relative_to(ROOT)}: {head.split('(')[0][-40:]}: {m.group(0)}")
    assert not bad, "local variables declared outside a kernel:\n" + "\n".join(bad)
