#!/bin/sh
# Make a kernel environment for one of d2l-en's TensorFlow or JAX tabs, with d2l-en's pins
# (docs/migrating-d2l.rst explains each), and a kernelspec named d2l-FRAMEWORK inside it:
#   tests/envs/make.sh tensorflow|jax DIR
# The kernelspec lies in DIR/share/jupyter/kernels/d2l-FRAMEWORK: put DIR/share/jupyter on
# JUPYTER_PATH to use it. Idempotent: an environment whose marker file exists is left alone.
set -eu
framework=$1
dir=$2
python=${LIVECELLS_ENV_PYTHON:-python3.11}
common="numpy==1.23.5 matplotlib==3.7.2 matplotlib-inline==0.1.6 pandas==2.0.3 scipy==1.10.1
requests==2.31.0 tensorflow-cpu==2.12.0 tensorflow-datasets==4.9.2 tensorflow-metadata==1.13.1
ipykernel"
case $framework in
tensorflow) pins="$common tensorflow-probability==0.20.0" ;;
jax) pins="$common jax==0.4.13 jaxlib==0.4.13 flax==0.7.0 optax==0.1.7 chex<0.1.82" ;;
*) echo "make.sh: unknown framework '$framework' (tensorflow or jax)" >&2; exit 2 ;;
esac
if [ -e "$dir/.livecells-env-ok" ]; then exit 0; fi
"$python" -m venv "$dir"
# shellcheck disable=SC2086
"$dir/bin/pip" install --quiet $pins
# d2l-en's own package as released (its d2l/jax.py and d2l/tensorflow.py are d2l-en 23d7a5a's);
# without its pins (jupyter 1.0.0 ...), which the line above already chose.
"$dir/bin/pip" install --quiet --no-deps d2l==1.0.3
"$dir/bin/python" -m ipykernel install --prefix "$dir" --name "d2l-$framework" \
    --display-name "d2l $framework"
touch "$dir/.livecells-env-ok"
