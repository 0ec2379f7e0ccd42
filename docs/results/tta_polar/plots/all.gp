set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/tta_polar/accuracy_vs_epoch_all.png'
set title 'tta_polar'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/tta_polar/plots/all_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/tta_polar/plots/all_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'topk_100x_ef', \
     'docs/results/tta_polar/plots/all_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'polar_r10_allgather', \
     'docs/results/tta_polar/plots/all_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'polar_r25_allgather'
set output 'docs/results/tta_polar/accuracy_vs_time_all.png'
set title 'tta_polar'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/tta_polar/plots/all_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/tta_polar/plots/all_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'topk_100x_ef', \
     'docs/results/tta_polar/plots/all_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'polar_r10_allgather', \
     'docs/results/tta_polar/plots/all_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'polar_r25_allgather'
set output 'docs/results/tta_polar/accuracy_vs_bytes_all.png'
set title 'tta_polar'
set xlabel 'MB sent per worker'
set logscale x
plot 'docs/results/tta_polar/plots/all_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/tta_polar/plots/all_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'topk_100x_ef', \
     'docs/results/tta_polar/plots/all_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'polar_r10_allgather', \
     'docs/results/tta_polar/plots/all_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'polar_r25_allgather'
