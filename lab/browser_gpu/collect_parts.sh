# Sourced on the GPU machine by run_device.sh here and by lab/browser_bench/run_device.sh, with `run` set to the
# carried run/ folder (its parts.sha256) and `scratch` to the folder kept between calls: keeps each part a call
# brings in $scratch/parts, and once all of them are there unpacks them into $scratch/tree (once). Sets
# parts_complete=1 and tree when the tree is ready; otherwise prints what the machine has and sets parts_complete=0.
carry=$(dirname "$run")
mkdir -p "$scratch/parts"
for part in "$carry"/part-*; do [ -e "$part" ] && cp "$part" "$scratch/parts/"; done
have=0; need=0
while read -r sum name; do
  need=$((need + 1))
  [ -e "$scratch/parts/$name" ] && echo "$sum  $scratch/parts/$name" | sha256sum -c --status && have=$((have + 1))
done < "$run/parts.sha256"
tree="$scratch/tree"
parts_complete=0
if [ "$have" -lt "$need" ]; then
  # what the machine has that the run will rely on, while the rest of the parts travel
  ldd --version | head -1; nvidia-smi -L; ls /usr/local/nvidia/share/vulkan/icd.d/ 2>&1; df -h /dev/shm /tmp | tail -2
  for lib in libvulkan.so.1 libGLdispatch.so.0 libX11.so.6 libglib-2.0.so.0 libnss3.so libstdc++.so.6; do
    echo "$lib: $(ldconfig -p | grep -m1 "$lib" | sed 's/.*=> //')"
  done
  echo "this machine has $have of the $need parts in $scratch/parts; send the call with the next part now"
  echo "(the machine must stay warm between these calls; if it was given back, start again with part-00)"
elif [ -x "$tree/chromium/chromium-headless-shell" ]; then
  parts_complete=1
else
  mkdir -p "$tree"
  if (cd "$scratch/parts" && cat $(cut -d' ' -f3 "$run/parts.sha256")) | xz -dc -T0 | tar -C "$tree" -xf -; then
    parts_complete=1
  else
    echo "unpacking the parts failed"
  fi
fi

# NVIDIA's Vulkan driver manifest: where the image mounts the driver, else the usual places
icd=
for candidate in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
  /etc/vulkan/icd.d/nvidia_icd.json; do
  [ -e "$candidate" ] && { icd=$candidate; break; }
done
if [ -n "$icd" ]; then
  export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd
else
  icd="none found (the loader's defaults)"
fi
