#!/usr/bin/env bash
# Pack headless Chromium, Node and Dawn for the lent GPU machine (no package access, no Node, few X libraries):
#   bash lab/browser_gpu/pack.sh [DEST] [PART_MiB]
# DEST (default: .browser-carry in the repo root; keep it ignored by git) gets
#   run/         this folder's scripts and page, and parts.sha256 (the parts the device must have before it unpacks)
#   part-NN      one xz-compressed tar, cut into PART_MiB pieces (default 53): one piece per device call, since a call
#                carries 64 MiB at most, the repo's own files included
# The tar holds chromium/ (Debian's chromium-headless-shell, the files of chromium-common it loads, and in lib/ every
# library they need but glibc and the C++ runtime, taken from Debian's packages, not from this machine) and node/
# (this machine's node and the npm `webgpu` package's dawn.node). Needs apt-get (Debian 12 sources) and xz.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dest=$(mkdir -p "${1:-$root/.browser-carry}" && cd "${1:-$root/.browser-carry}" && pwd)
part_mib=${2:-53}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The libraries chromium-headless-shell, its Vulkan loader and SwiftShader link (ldd on Debian 12), the Vulkan loader
# and glvnd's dispatch library for Node's Dawn and NVIDIA's Vulkan driver. libc6, libgcc-s1 and libstdc++6 are the
# GPU machine's own (a newer glibc there; carrying these would shadow the driver's).
libs="libasound2 libasyncns0 libatk1.0-0 libatspi2.0-0 libblkid1 libbrotli1 libbsd0 libcap2 libdav1d6 libdbus-1-3
  libdouble-conversion3 libdrm2 libexpat1 libffi8 libflac12 libfontconfig1 libfreetype6 libgbm1 libgcrypt20
  libglib2.0-0 libgpg-error0 libgraphite2-3 libharfbuzz-subset0 libharfbuzz0b libjpeg62-turbo liblcms2-2 liblz4-1
  liblzma5 libmd0 libminizip1 libmount1 libmp3lame0 libmpg123-0 libnspr4 libnss3 libogg0 libopenh264-7 libopenjp2-7
  libopus0 libpcre2-8-0 libpng16-16 libpulse0 libselinux1 libsndfile1 libsystemd0 libudev1 libvorbis0a
  libvorbisenc2 libx11-6 libx11-xcb1 libxau6 libxcb1 libxcomposite1 libxdamage1 libxdmcp6 libxext6 libxfixes3 libxi6
  libxkbcommon0 libxnvctrl0 libxrandr2 libxrender1 libzstd1 zlib1g libglvnd0 libvulkan1 libsqlite3-0"

mkdir -p "$work/debs" "$work/lists/partial" "$work/x" "$work/tree/chromium/lib" "$work/tree/node"
o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$work/lists"
apt-get $o update -qq
(cd "$work/debs" && apt-get $o download -qq chromium-headless-shell chromium-common $libs)
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$work/x"; done

chromium="$work/tree/chromium"
cp "$work"/x/usr/lib/chromium/{chromium-headless-shell,headless_lib_data.pak,headless_lib_strings.pak} "$chromium/"
cp "$work"/x/usr/lib/chromium/{headless_command_resources.pak,icudtl.dat,v8_context_snapshot.bin,snapshot_blob.bin} \
  "$chromium/"
cp "$work"/x/usr/lib/chromium/{libvulkan.so.1,libvk_swiftshader.so,vk_swiftshader_icd.json} "$chromium/"
# the libraries' real files under their sonames (symlinks would not survive every copy)
multiarch=x86_64-linux-gnu
for pkgdir in "$work/x/lib/$multiarch" "$work/x/usr/lib/$multiarch" "$work/x/usr/lib/$multiarch/pulseaudio"; do
  [ -d "$pkgdir" ] || continue
  for f in "$pkgdir"/*.so*; do
    [ -e "$f" ] || continue
    soname=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ -n "$soname" ] && [ ! -e "$chromium/lib/$soname" ] && cp -L "$f" "$chromium/lib/$soname"
  done
done

# every library any carried program links must be carried or be glibc / the C++ runtime
missing=$(for f in "$chromium"/chromium-headless-shell "$chromium"/*.so* "$chromium"/lib/*; do
  readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
done | sort -u | while read -r need; do
  case "$need" in
    libc.so.6|libm.so.6|libdl.so.2|libpthread.so.0|librt.so.1|libresolv.so.2|ld-linux-x86-64.so.2) ;;
    libstdc++.so.6|libgcc_s.so.1) ;;
    *) [ -e "$chromium/lib/$need" ] || [ -e "$chromium/$need" ] || echo "$need" ;;
  esac
done)
if [ -n "$missing" ]; then
  echo "these libraries are needed but not packed; add their Debian packages to the list in $0:" $missing >&2
  exit 1
fi

cp "$(command -v node)" "$work/tree/node/node"
cp "$root/node_modules/webgpu/dist/linux-x64/dawn.node" "$work/tree/node/dawn.node"

rm -rf "$dest/run" "$dest"/part-*
mkdir -p "$dest/run"
cp "$here"/{run_device.sh,collect_parts.sh,tab_vs_node.mjs,webgpu_costs.mjs,chromium_flags.mjs,bench.html} "$dest/run/"
echo "packing $(du -sh "$work/tree" | cut -f1) (xz -9, a few minutes)"
tar -C "$work/tree" -cf - chromium node | xz -9 -T2 > "$work/bundle.tar.xz"
split -b "${part_mib}M" -d -a 2 "$work/bundle.tar.xz" "$dest/part-"
(cd "$dest" && sha256sum part-* > run/parts.sha256)
chromium_version=$(dpkg-deb -f "$work"/debs/chromium-headless-shell_*.deb Version)
echo "$chromium_version" > "$dest/run/chromium-version"
ls -l "$dest" "$dest/run"
echo "Chromium $chromium_version; one device call per part, back to back (the machine keeps /tmp ~30 s)."
echo "carry: ${dest#$root/}/run and ${dest#$root/}/part-NN; command: bash ${dest#$root/}/run/run_device.sh"
