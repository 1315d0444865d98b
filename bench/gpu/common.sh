# What the prepared GPU scripts share (sourced; $out must be set): `run NAME
# COMMAND...` sends the output to $out/NAME.txt with its exit status and
# the command to $out/commands.txt, and prints the last lines; `mpi` is the
# launcher as root on the one-GPU machine.
mkdir -p "$out"
run() {
  name=$1
  shift
  echo "\$ $*" >>"$out/commands.txt"
  "$@" >"$out/$name.txt" 2>&1
  echo "exit $?" >>"$out/$name.txt"
  tail -3 "$out/$name.txt"
}
mpi="mpirun --allow-run-as-root --oversubscribe"
