set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set output 'docs/results/simulate/sim_h4_100mbit_topk/speedup_0.1gbit.png'
set grid
set key top left
set logscale x 2
set logscale y 2
set xlabel 'workers'
set ylabel 'speed-up (n x scaling efficiency)'
set title 'frugal simulate: cnn, 0.1 Gbit/s NICs, --overlap priority'
plot 'docs/results/simulate/sim_h4_100mbit_topk/speedup_0.1gbit_0.dat' using 1:2 with linespoints lw 2 title 'topk:ratio=0.01', x title 'linear' dt 2 lc rgb 'gray'
