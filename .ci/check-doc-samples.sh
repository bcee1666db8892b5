#!/usr/bin/env bash
# Compiles every Swift sample the documentation shows, so the docs cannot drift from the API.
#
#   .ci/check-doc-samples.sh            (make doc-samples)
#
# Sources: every ```swift block in Sources/*/*.docc/**/*.md, and the ```swift blocks of README.md's
# "## Library example" section. Each block becomes the main.swift of an executable target of its own in a
# throwaway package (.build/doc-samples/package) that depends on this package by path, so a sample sees exactly
# what a user of the library sees: the library products and their public API, nothing `package` or internal.
# The package is built with `swift build` (not run). A failure names the document and the block, and maps the
# compiler's line numbers back to the document's.
#
# A block is a whole program: it imports what it uses and declares what it needs. A block preceded by an HTML
# comment `<!-- doc-sample: needs … -->` is built all the same; the note is printed when it fails, to say what
# the sample was written against (an API still landing, say). Nothing is ever skipped: a block that imports a
# module this package does not export as a library product fails, naming the missing product.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

root="$PWD"
work="${DOC_SAMPLES_DIR:-$root/.build/doc-samples}"
mkdir -p "$work"

# 1. Extract the blocks and write the package. Prints one line per sample; exit 1 on a sample that cannot work.
python3 - "$root" "$work" <<'PY'
import json, os, re, shutil, subprocess, sys

root, work = sys.argv[1], sys.argv[2]
pkg = os.path.join(work, "package")

def blocks(path, section=None):
    """Yields (line number of the first code line, code, note) for each ```swift block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    inside, start, code, note, last_note = False, 0, [], None, None
    in_section = section is None
    for number, line in enumerate(lines, 1):
        if section is not None and not inside and line.startswith("## "):
            in_section = line.strip() == section
        if not in_section:
            continue
        if not inside:
            m = re.match(r"\s*<!--\s*doc-sample:\s*(.*?)\s*-->", line)
            if m:
                last_note = m.group(1)
                continue
            if re.match(r"^\s*```swift\s*$", line):
                inside, start, code, note = True, number + 1, [], last_note
            elif line.strip():
                last_note = None
            continue
        if re.match(r"^\s*```\s*$", line):
            inside = False
            last_note = None
            yield start, "\n".join(code) + "\n", note
        else:
            code.append(line)

sources = []
for dirpath, _, files in os.walk(os.path.join(root, "Sources")):
    if ".docc" not in dirpath:
        continue
    for name in sorted(files):
        if name.endswith(".md"):
            sources.append((os.path.join(dirpath, name), None))
sources.sort()
sources.append((os.path.join(root, "README.md"), "## Library example"))

# The library products this package exports, and the modules they give access to.
dump = json.loads(subprocess.run(["swift", "package", "dump-package"], cwd=root, check=True,
                                 capture_output=True, text=True).stdout)
products = {}
for product in dump["products"]:
    if "library" in product["type"]:
        for target in product["targets"]:
            products.setdefault(target, product["name"])
external = {"Logging": ("swift-log", "Logging"), "ServiceLifecycle": ("swift-service-lifecycle", "ServiceLifecycle")}
system = {"Foundation", "Glibc", "Dispatch", "Synchronization", "Swift", "_Concurrency"}

identity = os.path.basename(root).lower()
samples, problems = [], []
for path, section in sources:
    relative = os.path.relpath(path, root)
    for index, (line, code, note) in enumerate(blocks(path, section), 1):
        stem = re.sub(r"[^A-Za-z0-9]", "_", os.path.splitext(relative)[0].replace("Sources/", ""))
        target = f"Sample_{stem}_{index}"
        imports = re.findall(r"^\s*(?:@\w+\s+)*(?:public\s+|internal\s+|package\s+)?import\s+(\w+)", code, re.M)
        dependencies = []
        for module in imports:
            if module in system:
                continue
            if module in products:
                dependencies.append(f'.product(name: "{products[module]}", package: "{identity}")')
            elif module in external:
                package, product = external[module]
                dependencies.append(f'.product(name: "{product}", package: "{package}")')
            else:
                problems.append(f"{relative}:{line}: sample {index} imports {module}, which this package does not "
                                f"export as a library product" + (f" (the sample notes: {note})" if note else ""))
        samples.append(dict(target=target, file=relative, line=line, index=index, code=code, note=note,
                            dependencies=sorted(set(dependencies))))

if problems:
    print("doc samples that cannot be built against this tree:", file=sys.stderr)
    for problem in problems:
        print("  " + problem, file=sys.stderr)
    sys.exit(1)

if os.path.isdir(os.path.join(pkg, "Sources")):
    shutil.rmtree(os.path.join(pkg, "Sources"))
os.makedirs(pkg, exist_ok=True)
targets = []
for sample in samples:
    directory = os.path.join(pkg, "Sources", sample["target"])
    os.makedirs(directory)
    with open(os.path.join(directory, "main.swift"), "w", encoding="utf-8") as f:
        f.write(sample["code"])
    deps = ", ".join(sample["dependencies"])
    targets.append(f'        .executableTarget(name: "{sample["target"]}", dependencies: [{deps}]),')
    print(f'sample {sample["target"]}: {sample["file"]}:{sample["line"]}')
urls = {"swift-log": ("https://github.com/apple/swift-log", "1.16.2"),
        "swift-service-lifecycle": ("https://github.com/swift-server/swift-service-lifecycle", "2.13.0")}
used = sorted({p for sample in samples for p in urls if f'package: "{p}"' in " ".join(sample["dependencies"])})
packages = [f'        .package(url: "{urls[p][0]}", from: "{urls[p][1]}"),' for p in used]
manifest = f'''// swift-tools-version:6.2
// Generated by .ci/check-doc-samples.sh: every Swift sample of the documentation as a program of its own.
import PackageDescription

let package = Package(
    name: "DocSamples",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "{root}"),
{chr(10).join(packages)}
    ],
    targets: [
{chr(10).join(targets)}
    ]
)
'''
with open(os.path.join(pkg, "Package.swift"), "w") as f:
    f.write(manifest)
with open(os.path.join(work, "samples.json"), "w") as f:
    json.dump(samples, f)
PY

# 2. Build them all (the library's own targets are built once, in this scratch path). SwiftPM stops at the
# first target that fails, so on a failure every sample is built again on its own, to report each broken one.
log="$work/build-log.txt"
status=0
timeout 900 swift build --package-path "$work/package" --scratch-path "$work/build" >"$log" 2>&1 || status=$?
if ((status != 0 && status != 124)); then
    for target in $(python3 -c 'import json, sys; print(" ".join(s["target"] for s in json.load(open(sys.argv[1]))))' "$work/samples.json"); do
        timeout 300 swift build --package-path "$work/package" --scratch-path "$work/build" --target "$target" >>"$log" 2>&1 || true
    done
fi

# 3. Report, per sample, with the document's line numbers.
python3 - "$work" "$status" <<'PY'
import json, os, re, sys
work, status = sys.argv[1], int(sys.argv[2])
samples = {s["target"]: s for s in json.load(open(os.path.join(work, "samples.json")))}
log = open(os.path.join(work, "build-log.txt"), encoding="utf-8", errors="replace").read().split("\n")
failed = {}
for line in log:
    m = re.match(r"^(/.*?/Sources/(Sample_\w+)/main\.swift):(\d+):(\d+): (error|warning): (.*)$", line)
    if m and m.group(2) in samples:
        sample = samples[m.group(2)]
        doc_line = sample["line"] + int(m.group(3)) - 1
        message = f'{sample["file"]}:{doc_line}:{m.group(4)}: {m.group(5)}: {m.group(6)}'
        if message not in failed.get(m.group(2), []):
            failed.setdefault(m.group(2), []).append(message)
if status == 124:
    print("doc samples: the build did not finish within 900 s", file=sys.stderr)
for target, messages in sorted(failed.items()):
    sample = samples[target]
    print(f'FAILED: {sample["file"]}, swift block {sample["index"]} (line {sample["line"]})', file=sys.stderr)
    if sample["note"]:
        print(f'  the sample notes: {sample["note"]}', file=sys.stderr)
    for message in messages:
        print("  " + message, file=sys.stderr)
if status != 0:
    if not failed:
        print("doc samples: the build failed outside the samples; the end of the log:", file=sys.stderr)
        print("\n".join(log[-30:]), file=sys.stderr)
    sys.exit(1)
if failed:  # warnings only
    sys.exit(1)
print(f"doc samples: all {len(samples)} built, no warnings")
PY
