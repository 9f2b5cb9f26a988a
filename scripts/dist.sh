#!/usr/bin/env bash
# The release build: scripts/dist.sh VERSION
#
# Writes into dist/ (or $DIST_DIR), for linux/amd64 and linux/arm64:
#   ackd_VERSION_linux_ARCH   static binary (CGO_ENABLED=0, -trimpath), with
#                             VERSION and the git commit stamped in
#                             (`ackd version`, ackd_build_info)
#   ackd_VERSION_ARCH.deb     the Debian package (packaging/deb: control, maintainer scripts)
#   SHA256SUMS                sha256sum of every file above
#
# It needs Go (go.mod's version), git, dpkg-deb and sha256sum; no cgo, no
# network beyond the Go module proxy for a cold module cache.
#
#   VERSION      a Debian-compatible version starting with a digit: 0.2.0,
#                0.2.0~rc1 (no leading "v")
#   DIST_DIR     output directory (default: the repository's dist/)
#   DIST_ARCHES  architectures (default: "amd64 arm64")
set -euo pipefail

usage() {
	echo "usage: scripts/dist.sh VERSION   (e.g. scripts/dist.sh 0.2.0)" >&2
	exit 2
}
[[ $# -eq 1 ]] || usage
version=$1
[[ $version =~ ^[0-9][A-Za-z0-9.+~]*$ ]] || {
	echo "dist.sh: VERSION $version must start with a digit and use only letters, digits and . + ~ (a Debian version; no leading v)" >&2
	exit 2
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# DIST_DIR is taken relative to where dist.sh was started; dist/ is the repo's.
out=${DIST_DIR:-$repo/dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$repo"
arches=${DIST_ARCHES:-amd64 arm64}

for tool in go dpkg-deb sha256sum; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "dist.sh: $tool not found" >&2
		exit 1
	}
done

# The commit, stamped with -ldflags: the toolchain's own VCS stamp is
# missing in a git worktree (it wants a .git directory), so dist.sh does not
# rely on it. A tree with uncommitted changes, or with untracked files that
# .gitignore does not name (an extra .go file changes the build as surely as
# an edit), says so.
commit=""
if git rev-parse --git-dir >/dev/null 2>&1; then
	commit=$(git rev-parse HEAD)
	if [[ -n $(git status --porcelain --untracked-files=all) ]]; then
		commit+="-dirty"
	fi
	# Timestamps inside the packages: the commit's, so that two builds of
	# one commit give the same .deb.
	export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
fi
pkg=github.com/ackd/ackd/internal/buildinfo
ldflags="-s -w -X $pkg.version=$version -X $pkg.commit=$commit"

rm -f "$out"/ackd_"$version"_*
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The binaries, built side by side (one build leaves cores idle while it
# compiles the largest packages and links).
pids=()
for arch in $arches; do
	bin="$out/ackd_${version}_linux_${arch}"
	echo "dist.sh: building $(basename "$bin")"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$bin" . &
	pids+=($!)
done
for pid in "${pids[@]}"; do
	wait "$pid" || {
		echo "dist.sh: go build failed (output above)" >&2
		exit 1
	}
done

# --- the packages --------------------------------------------------------------
for arch in $arches; do
	bin="$out/ackd_${version}_linux_${arch}"
	root="$work/$arch"
	install -d -m 0755 "$root/DEBIAN" "$root/usr/bin" "$root/usr/lib/systemd/system" \
		"$root/etc/ackd" "$root/usr/share/ackd" "$root/usr/share/doc/ackd"
	install -m 0755 "$bin" "$root/usr/bin/ackd"
	install -m 0644 systemd/ackd.service systemd/ackd-backup.service systemd/ackd-backup.timer \
		"$root/usr/lib/systemd/system/"
	install -m 0644 systemd/ackd.toml "$root/etc/ackd/ackd.toml"
	install -m 0644 systemd/Caddyfile systemd/litestream.service systemd/litestream.yml "$root/usr/share/ackd/"
	install -m 0644 README.md CHANGELOG.md "$root/usr/share/doc/ackd/"
	# The documentation, for an operator on the VM without a browser: the
	# install page, the runbook, the references (links between pages work;
	# links to the repository's files do not).
	(cd docs && find . -type d) | while read -r dir; do
		install -d -m 0755 "$root/usr/share/doc/ackd/docs/$dir"
	done
	# The pages and the images they show (docs/img: the console's
	# screenshots), so that a page read in a browser on the VM has them.
	(cd docs && find . -type f \( -name '*.md' -o -name '*.png' \)) | while read -r page; do
		install -m 0644 "docs/$page" "$root/usr/share/doc/ackd/docs/$page"
	done
	install -m 0644 packaging/deb/copyright "$root/usr/share/doc/ackd/copyright"
	install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$root/DEBIAN/"
	install -m 0644 packaging/deb/conffiles "$root/DEBIAN/conffiles"
	size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
	sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
		packaging/deb/control >"$root/DEBIAN/control"
	chmod 0644 "$root/DEBIAN/control"

	deb="$out/ackd_${version}_${arch}.deb"
	dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
	echo "dist.sh: built $(basename "$deb")"
done

# SHA256SUMS keeps the lines of other versions built into the same directory
# and replaces this version's.
(
	cd "$out"
	{
		if [[ -f SHA256SUMS ]]; then grep -vF "  ackd_${version}_" SHA256SUMS || true; fi
		sha256sum ackd_"$version"_*
	} | sort -k 2 >SHA256SUMS.new
	mv SHA256SUMS.new SHA256SUMS
)
echo "dist.sh: wrote $out/SHA256SUMS"
